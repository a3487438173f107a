"""Every CLI command talking to Redis is bounded by its ``--timeout`` in all its phases,
however Redis fails to answer: down, stopped (SIGSTOP), or behind a partition that
drops packets without a word (a port whose connections are accepted and never served).
It says what happened, with an exit status, and never hangs for the sockets' defaults."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.cli import apportion
from tests.support.jobs import SMALL_PARTITION
from tests.support.processes import RedisServer, free_port

pytestmark = [pytest.mark.redis]

JOB = json.dumps({**SMALL_PARTITION, "job_id": "bounded-1"})


@pytest.fixture
def blackhole() -> Iterator[str]:
    """A Redis URL whose connections the kernel accepts and nobody ever answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"


@pytest.fixture
def stopped(tmp_path: Path) -> Iterator[str]:
    """A redis-server that answered once, then stopped (SIGSTOP) as in a long stall."""
    server = RedisServer(port=free_port(), workdir=tmp_path / "redis")
    server.start()
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        yield server.url
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
        server.stop()


@pytest.mark.parametrize("where", ["blackhole", "stopped"])
def test_submit_and_wait_gives_up_within_its_timeout_when_redis_does_not_answer(
    where: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(where)
    started = time.monotonic()
    done = apportion(
        "submit",
        "partition",
        "-",
        "--wait",
        "--timeout",
        "10",
        stdin=JOB,
        env={"APPORTION_REDIS_URL": url},
        timeout=120,
    )
    seconds = time.monotonic() - started

    assert seconds < 15, seconds
    assert done.returncode == 1
    assert "cannot reach the broker" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("where", ["blackhole", "stopped"])
def test_health_reports_within_its_timeout_when_redis_does_not_answer(
    where: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(where)
    started = time.monotonic()
    done = apportion("health", "--timeout", "2", env={"APPORTION_REDIS_URL": url}, timeout=120)
    seconds = time.monotonic() - started

    assert seconds < 8, seconds
    assert done.returncode == 1
    assert "UNHEALTHY" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
