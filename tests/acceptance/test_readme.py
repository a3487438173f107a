"""A newcomer's first hour, as the README tells it, from a clean checkout.

The checkout is a copy of the repository's files (what `git clone` gives: tracked files
and new ones not yet committed, nothing ignored: no .venv, no node_modules, no var/).
Then, in it, exactly the README's commands:

1. `scripts/demo`: creates .venv, installs apportion from the lock and runs the demo.
2. The test command, `scripts/test`, read rather than run: CI runs exactly it, from a
   fresh clone (.ci/run), so running it again from inside the suite would repeat CI's
   install, lint, type check and pytest for nothing. This checks that the README's test
   command is the one CI runs and that it installs the tools, checks the whole tree and
   passes its arguments to pytest.
3. "Your first hour, through Redis", line by line: a worker (its metrics port), `apportion
   health`, `submit --wait` for every example (each prints the envelope beside it in
   examples/), the worker's metrics, `apportion metrics --once`, the Node producer
   (`npm ci` from the registry), Flower with its credentials.
4. After the demo, `apportion explain --out picture.png` names the command that adds the
   plot extra, and after that command it draws the picture (issue 31): last, in the same
   checkout, so that one install of the project serves all three.

The only departures, all for running beside other tests on a shared machine: the README
says `scripts/ensure-redis` (a redis-server on 127.0.0.1:6379) and exports its URL
as APPORTION_REDIS_URL; this test uses its own redis-server on a free port instead, in
APPORTION_REDIS_URL for every command, and the ports 9101 and 5555 are replaced by free
ones. The "second terminal" and "third terminal" lines run in the background.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.gen_docs import without_timing
from tests.support.processes import REPO, RedisServer, clean_checkout, free_port, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.slow, pytest.mark.long]

README = (REPO / "README.md").read_text()
TWO_COMMANDS = ["scripts/demo", "scripts/test"]
REDIS_URL = "APPORTION_REDIS_URL"


def first_hour() -> list[str]:
    """The command lines of the README's "Your first hour" block, in order."""
    section = README.split("## Your first hour", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def command(line: str) -> str:
    return line.split("   #", 1)[0].split("  #", 1)[0].strip()


@dataclass
class Checkout:
    root: Path
    env: dict[str, str]
    background: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def run(self, line: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", line],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self, line: str, log: Path) -> None:
        with open(log, "wb") as out:
            self.background.append(
                subprocess.Popen(
                    ["bash", "-c", line],
                    cwd=self.root,
                    env=self.env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )


@pytest.fixture(scope="module")
def checkout(
    tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer
) -> Iterator[Checkout]:
    root = tmp_path_factory.mktemp("newcomer") / "apportion"
    clean_checkout(root)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("APPORTION_", "VIRTUAL_ENV", "PYTEST", "FLOWER_"))
    }
    # The interpreter the suite runs on, as a newcomer's python3 (not this suite's venv).
    env["PYTHON"] = getattr(sys, "_base_executable", sys.executable)
    env["APPORTION_REDIS_URL"] = redis_server.url
    checkout = Checkout(root, env)
    try:
        yield checkout
    finally:
        for proc in checkout.background:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def test_the_readme_starts_with_the_two_commands() -> None:
    block = README.split("```sh\n", 1)[1].split("```", 1)[0]

    assert [command(line) for line in block.splitlines()] == TWO_COMMANDS


def test_the_readme_is_a_users_page_of_at_most_250_lines() -> None:
    assert len(README.splitlines()) <= 250


def test_the_first_hour_puts_the_redis_it_starts_in_apportion_redis_url() -> None:
    lines = [command(line) for line in first_hour()]
    ensure = next(line for line in lines if line.startswith("scripts/ensure-redis")).split()
    url = next(line for line in lines if line.startswith(f"export {REDIS_URL}="))
    # scripts/ensure-redis [--port PORT], 6379 by default.
    port = ensure[ensure.index("--port") + 1] if "--port" in ensure else "6379"

    # The export comes right after the Redis it names, before anything that reads it.
    assert lines.index(url) == lines.index(" ".join(ensure)) + 1
    assert url == f"export {REDIS_URL}=redis://127.0.0.1:{port}/0"


@pytest.fixture(scope="module")
def demo(checkout: Checkout) -> subprocess.CompletedProcess[str]:
    """`scripts/demo`, run once in the checkout: the first hour and the plot extra start
    from the .venv it installed, as a newcomer's do."""
    return checkout.run("scripts/demo")


def test_scripts_demo_installs_apportion_and_runs_the_demo(
    checkout: Checkout, demo: subprocess.CompletedProcess[str]
) -> None:
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "apportion demo" in demo.stdout
    assert "launch-failures stream" in demo.stdout
    assert (checkout.root / ".venv" / "bin" / "apportion").exists()


def test_the_test_command_is_what_ci_runs_and_checks_everything_before_pytest() -> None:
    steps = _script_lines(REPO / "scripts" / "test")
    pytest_runs = [line for line in steps if ".venv/bin/pytest" in line]

    assert "scripts/test" in _script_lines(REPO / ".ci" / "run")
    assert steps[: steps.index("scripts/typecheck") + 1] == [
        "set -euo pipefail",
        'cd "$(dirname "$0")/.."',
        "scripts/bootstrap dev",
        "scripts/ensure-redis --binary-only",
        "scripts/ensure-compose",
        "scripts/ensure-browser",
        ".venv/bin/ruff check .",
        ".venv/bin/ruff format --check .",
        "scripts/typecheck",
    ]
    assert len(pytest_runs) == 3
    assert all('"$@"' in line for line in pytest_runs)
    syntax = subprocess.run(["bash", "-n", str(REPO / "scripts" / "test")], check=False)
    assert syntax.returncode == 0


def _script_lines(path: Path) -> list[str]:
    """A shell script's commands, one a line, without comments and blank lines."""
    lines = (line.split("  #")[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def test_the_first_hour_through_redis_works_line_by_line(
    checkout: Checkout, demo: subprocess.CompletedProcess[str], tmp_path: Path
) -> None:
    assert demo.returncode == 0, "the first hour starts after scripts/demo"
    lines = first_hour()
    metrics_port, flower_port = free_port(), free_port()

    def worker_up() -> bool:
        return checkout.run(".venv/bin/apportion health").returncode == 0

    def flower_up() -> bool:
        return _listening(flower_port)

    ports = {"9101": str(metrics_port), "5555": str(flower_port)}

    for line in lines:
        cmd = command(line)
        for old, new in ports.items():
            cmd = cmd.replace(old, new)
        if cmd.startswith("scripts/ensure-redis") or cmd.startswith(f"export {REDIS_URL}="):
            continue  # this test's own redis-server, in APPORTION_REDIS_URL (module doc)
        if "second terminal" in line or "third terminal" in line:
            checkout.start(cmd, tmp_path / f"background-{len(checkout.background)}.log")
            if "apportion worker" in cmd:
                wait_until(worker_up, 120, interval=1, what="the worker")
            else:
                wait_until(flower_up, 60, what="flower")
            continue
        proc = checkout.run(cmd)
        assert proc.returncode == 0, (cmd, proc.stdout[-2000:], proc.stderr[-2000:])
        check_output(checkout, cmd, proc.stdout)


def test_after_the_demo_a_picture_names_the_command_that_adds_the_plot_extra_which_works(
    checkout: Checkout, demo: subprocess.CompletedProcess[str]
) -> None:
    """The demo installs no plot extra (matplotlib is a graphics stack: the demo stays
    quick); the failure names `scripts/bootstrap plot`, which adds it at the locked
    versions. After the first hour, which it would otherwise run with the extra."""
    explain = ".venv/bin/apportion explain launch_select examples/launch_select.json --out p.png"
    assert demo.returncode == 0, "the picture is drawn after scripts/demo"

    without = checkout.run(explain)

    assert without.returncode == 1
    assert "the plot extra: in the checkout run `scripts/bootstrap plot`" in without.stderr
    assert not (checkout.root / "p.png").exists()

    added = checkout.run("scripts/bootstrap plot", timeout=900)
    assert added.returncode == 0, added.stderr[-2000:]
    drawn = checkout.run(explain)

    assert drawn.returncode == 0, drawn.stderr[-2000:]
    assert (checkout.root / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # At the version the lock pins, not whatever the index has newest.
    pinned = next(
        line
        for line in (REPO / "requirements" / "dev.lock").read_text().splitlines()
        if line.startswith("matplotlib==")
    )
    installed = checkout.run(".venv/bin/python -m pip freeze")
    assert pinned in installed.stdout.splitlines()


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def check_output(checkout: Checkout, cmd: str, stdout: str) -> None:
    """What the README says each command shows."""
    if " submit " in cmd:
        example = cmd.split()[3]  # examples/<name>.json
        envelope = json.loads(stdout)
        expected = json.loads(
            (checkout.root / example.replace(".json", ".envelope.json")).read_text()
        )
        if envelope["kind"] == "launch_outcome":
            # Whether the worker's failure history took it (examples/README.md).
            assert envelope["result"].pop("recorded") in (True, False)
            envelope["result"].pop("skipped")
            expected["result"].pop("recorded")
            expected["result"].pop("skipped")
        assert without_timing(envelope) == without_timing(expected)
    elif cmd.endswith("health"):
        assert stdout.startswith("healthy")
    elif "/metrics" in cmd:
        assert 'apportion_jobs_total{code="",kind="partition",status="ok"}' in stdout
    elif "metrics --once" in cmd:
        assert "apportion_redis_up 1.0" in stdout
    elif cmd.startswith("node "):
        assert json.loads(stdout)["envelope"]["status"] == "ok"
    elif "/api/tasks" in cmd:
        tasks = json.loads(stdout)
        names = {task["name"] for task in tasks.values()}
        assert {"apportion.partition", "apportion.launch_outcome"} <= names
        results = [str(task.get("result")) for task in tasks.values()]
        assert any(result.startswith("OK (job example-partition-1") for result in results)
