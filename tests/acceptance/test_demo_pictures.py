"""After `scripts/demo`, `apportion explain --out picture.png` says which command adds the
plot extra, and after that command it draws the picture (issue 31).

The demo installs no plot extra (matplotlib is a graphics stack: the demo stays quick);
the failure names `scripts/bootstrap plot`, which adds it at the locked versions. Run in
a copy of the repository's files, as `git clone` gives them (no .venv).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import REPO, clean_checkout

pytestmark = [pytest.mark.slow]


def test_after_the_demo_a_picture_names_the_command_that_adds_the_plot_extra_which_works(
    tmp_path: Path,
) -> None:
    root = tmp_path / "apportion"
    clean_checkout(root)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("APPORTION_", "VIRTUAL_ENV", "PYTEST"))
    }
    env["PYTHON"] = getattr(sys, "_base_executable", sys.executable)

    def run(line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", line], cwd=root, env=env, capture_output=True, text=True, timeout=900
        )

    explain = ".venv/bin/apportion explain launch_select examples/launch_select.json --out p.png"
    demo = run("scripts/demo")
    assert demo.returncode == 0, demo.stderr[-2000:]

    without = run(explain)

    assert without.returncode == 1
    assert "the plot extra: in the checkout run `scripts/bootstrap plot`" in without.stderr
    assert not (root / "p.png").exists()

    added = run("scripts/bootstrap plot")
    assert added.returncode == 0, added.stderr[-2000:]
    drawn = run(explain)

    assert drawn.returncode == 0, drawn.stderr[-2000:]
    assert (root / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # At the version the lock pins, not whatever the index has newest.
    pinned = next(
        line
        for line in (REPO / "requirements" / "dev.lock").read_text().splitlines()
        if line.startswith("matplotlib==")
    )
    installed = run(".venv/bin/python -m pip freeze")
    assert pinned in installed.stdout.splitlines()
