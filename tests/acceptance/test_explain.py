"""`apportion explain`: tables in the terminal, pictures in files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.acceptance.cli import apportion
from tests.conftest import EXAMPLES

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_a_launch_selection_is_drawn_as_pies_per_module_and_tabled(tmp_path: Path) -> None:
    out = tmp_path / "selection.png"
    proc = apportion(
        "explain",
        str(EXAMPLES / "launch_select.json"),
        "--kind",
        "launch_select",
        "--out",
        str(out),
    )

    assert proc.returncode == 0, proc.stderr
    for module in ("equal", "weights", "failure_penalty", "priority"):
        assert module in proc.stdout
    assert "vsphere-a" in proc.stdout
    assert "chosen: candidate 2 on vsphere-b" in proc.stdout
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert len(data) > 10_000


def test_a_partition_envelope_is_drawn_as_a_bar_per_disk_in_svg(tmp_path: Path) -> None:
    envelope = tmp_path / "envelope.json"
    solved = apportion("solve", "partition", str(EXAMPLES / "partition.json"))
    envelope.write_text(solved.stdout)
    out = tmp_path / "layout.svg"

    proc = apportion("explain", str(envelope), "--out", str(out))

    assert proc.returncode == 0, proc.stderr
    assert "ceph-journal" in proc.stdout
    svg = out.read_text()
    assert "<svg" in svg
    for label in ("sda (100 MiB)", "sdb (200 MiB)", "sdc (10 MiB)", "unallocated"):
        assert label in svg


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--kind", "launch_select", "--out", "x.pdf"), "--out must end in .png or .svg"),
        ((), "give its kind to solve it as a job: explain KIND FILE"),
    ],
)
def test_explain_mistakes_are_usage_errors(args: tuple[str, ...], message: str) -> None:
    proc = apportion("explain", str(EXAMPLES / "launch_select.json"), *args)

    assert proc.returncode == 2
    assert message in proc.stderr


def test_a_candidates_only_result_has_no_chart(tmp_path: Path) -> None:
    job = json.loads((EXAMPLES / "launch_select.candidates.json").read_text())
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    proc = apportion(
        "explain", str(path), "--kind", "launch_select", "--out", str(tmp_path / "x.png")
    )

    assert proc.returncode == 2
    assert "no selection" in proc.stderr
