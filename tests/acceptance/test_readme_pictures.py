"""The pictures in the README are what `apportion explain` draws for its examples."""

from __future__ import annotations

from pathlib import Path

from tests.acceptance.cli import apportion
from tests.conftest import EXAMPLES

REPO = Path(__file__).resolve().parents[2]


def test_the_readme_shows_both_pictures_and_their_sources_still_render(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    assert "docs/img/partition-layout.png" in readme
    assert "docs/img/launch-selection.png" in readme

    for job, kind in (
        (REPO / "docs/examples/partition-layout.json", "partition"),
        (EXAMPLES / "launch_select.json", "launch_select"),
    ):
        out = tmp_path / f"{kind}.png"
        proc = apportion("explain", str(job), "--kind", kind, "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        assert out.stat().st_size > 5_000
        assert (
            REPO
            / "docs/img"
            / ("partition-layout.png" if kind == "partition" else "launch-selection.png")
        ).exists()
