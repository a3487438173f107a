"""scripts/apt-install: two test runs that both find a package missing install it once.

scripts/test runs scripts/ensure-redis, ensure-compose and ensure-browser, which install
what is missing with apt-get. A second run started alongside (the suite is run under
load by a second run, issue 31) would find the same package missing, and its apt-get
would fail at once on the first one's lock of apt's package lists. Here apt-get is a
stand-in on PATH that refuses while another call is inside it, as apt does.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.processes import REPO, wait_until

SCRIPT = str(REPO / "scripts" / "apt-install")

# Refuses like apt while another call is inside it; ``update`` stays inside until the
# test writes ``release``; ``install`` records itself and installs the "package" (a file).
FAKE_APT_GET = """#!/usr/bin/env bash
dir="$(dirname "$0")"
if ! mkdir "$dir/busy" 2>/dev/null; then
  echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 1 (apt-get)" >&2
  exit 100
fi
trap 'rmdir "$dir/busy"' EXIT
for arg in "$@"; do
  case "$arg" in
    update) while [ ! -e "$dir/release" ]; do sleep 0.05; done ;;
    install) echo install >> "$dir/installs"; touch "$dir/installed" ;;
  esac
done
"""


def start(tmp: Path, fake: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "TMPDIR": str(tmp)}
    return subprocess.Popen(
        [SCRIPT, f"test -e {fake / 'installed'}", "some-package"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def fake_apt(tmp: Path) -> Path:
    fake = tmp / "bin"
    fake.mkdir()
    for name, text in (("apt-get", FAKE_APT_GET), ("sudo", '#!/bin/sh\nexec "$@"\n')):
        (fake / name).write_text(text)
        (fake / name).chmod(0o755)
    return fake


def test_a_second_run_waits_for_the_first_install_and_does_not_install_again(
    tmp_path: Path,
) -> None:
    fake = fake_apt(tmp_path)

    first = start(tmp_path, fake)
    wait_until(lambda: (fake / "busy").exists(), 30, what="the first run inside apt-get")
    second = start(tmp_path, fake)
    (fake / "release").touch()

    out_first, _ = first.communicate(timeout=60)
    out_second, _ = second.communicate(timeout=60)
    assert (first.returncode, second.returncode) == (0, 0), out_first + out_second
    assert (fake / "installs").read_text() == "install\n"
    assert "Could not get lock" not in out_first + out_second


def test_nothing_is_installed_when_the_check_already_passes(tmp_path: Path) -> None:
    fake = fake_apt(tmp_path)
    (fake / "installed").touch()

    done = start(tmp_path, fake)
    out, _ = done.communicate(timeout=60)

    assert (done.returncode, out) == (0, "")
    assert not (fake / "installs").exists()
