"""scripts/ensure-redis: a Redis of your own on the port you name, never silently
someone else's (issue 31).

It starts one where none listens and knows it as its own on the next run; a Redis it did
not start is refused, saying what it found (version, number of keys), unless accepted
with --accept-existing or ENSURE_REDIS_ACCEPT_EXISTING=1; its keys are left alone either
way. scripts/test asks only for the binary (the tests start their own servers).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.support.processes import REPO, RedisServer, free_port, wait_until

pytestmark = [pytest.mark.redis]

SCRIPT = str(REPO / "scripts" / "ensure-redis")


def ensure_redis(*args: str, tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("ENSURE_REDIS_")}
    environ = {**inherited, "TMPDIR": str(tmp), **env}
    return subprocess.run(
        [SCRIPT, *args], capture_output=True, text=True, env=environ, timeout=60, check=False
    )


@pytest.fixture
def someone_elses(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(port=free_port(), workdir=tmp_path / "theirs")
    server.start()
    with server.client() as client:
        client.mset({"their:a": "1", "their:b": "2"})
        client.select(3)
        client.set("their:c", "3")
    yield server
    server.stop()


def test_a_redis_it_did_not_start_is_refused_saying_its_version_and_keys(
    someone_elses: RedisServer, tmp_path: Path
) -> None:
    with someone_elses.client() as client:
        version = client.info("server")["redis_version"]

    proc = ensure_redis("--port", str(someone_elses.port), tmp=tmp_path)

    assert proc.returncode == 1
    assert f"Redis {version} on 127.0.0.1:{someone_elses.port}, holding 3 key(s)" in proc.stderr
    assert "not started by scripts/ensure-redis" in proc.stderr
    assert "--accept-existing" in proc.stderr
    with someone_elses.client() as client:
        assert client.dbsize() == 2  # untouched


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_a_redis_it_did_not_start_is_used_when_accepted_and_still_described(
    someone_elses: RedisServer, tmp_path: Path, how: str
) -> None:
    port = str(someone_elses.port)
    if how == "flag":
        proc = ensure_redis("--port", port, "--accept-existing", tmp=tmp_path)
    else:
        proc = ensure_redis("--port", port, tmp=tmp_path, ENSURE_REDIS_ACCEPT_EXISTING="1")

    assert proc.returncode == 0, proc.stderr
    assert "holding 3 key(s)" in proc.stderr
    assert "(accepted)" in proc.stderr


def test_it_starts_its_own_on_a_free_port_and_knows_it_as_its_own_next_time(
    tmp_path: Path,
) -> None:
    port = free_port()
    pidfile = tmp_path / f"apportion-redis-{port}" / "redis.pid"
    try:
        first = ensure_redis("--port", str(port), tmp=tmp_path)
        assert first.returncode == 0, first.stderr
        assert f"starting redis-server on 127.0.0.1:{port}" in first.stderr
        with redis.Redis(port=port, socket_timeout=5) as client:
            assert client.ping()
            client.set("mine", "1")

        again = ensure_redis("--port", str(port), tmp=tmp_path)

        assert again.returncode == 0, again.stderr
        assert again.stderr == ""
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), signal.SIGTERM)
            wait_until(lambda: not _listening(port), 10, what="its redis-server stopped")


def test_binary_only_starts_nothing_and_looks_at_no_port(
    someone_elses: RedisServer, tmp_path: Path
) -> None:
    proc = ensure_redis("--binary-only", "--port", str(someone_elses.port), tmp=tmp_path)

    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert not (tmp_path / f"apportion-redis-{someone_elses.port}").exists()


def test_the_test_command_needs_only_the_binary_not_a_server_on_6379() -> None:
    script = (REPO / "scripts" / "test").read_text()

    assert "scripts/ensure-redis --binary-only" in script
    assert "scripts/ensure-redis --binary-only" in (REPO / "scripts" / "test-latest").read_text()


@pytest.mark.parametrize("port", ["x", "0", "70000"])
def test_a_port_that_is_no_port_is_a_usage_error(port: str, tmp_path: Path) -> None:
    proc = ensure_redis("--port", port, tmp=tmp_path)

    assert proc.returncode == 2
    assert "the port must be" in proc.stderr


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
