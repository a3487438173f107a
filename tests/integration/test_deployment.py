"""The deployment files, started: the Procfile with honcho from a fresh copy of the
repository's files (no ./var/redis yet), and docker-compose.yml as far as this machine
allows.

docker-compose.yml cannot be started here: there is a Docker client but no engine. It is
validated by Compose itself (`docker compose config`, or `docker-compose config`) when
either is installed, which resolves the YAML anchors, checks every key against the
Compose specification and the required `FLOWER_BASIC_AUTH`; tests/unit/service/
test_deploy_files.py checks what each service runs. Building the image and running the
containers is left to a machine with Docker.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.acceptance.cli import apportion
from tests.conftest import REQUIRE_REDIS
from tests.support.gen_docs import example_jobs, kind_of
from tests.support.processes import REPO, free_port, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.slow]

PROCESSES = ["redis", "attach", "launch", "partition", "events", "flower", "metrics"]
AUTH = "deploy:pa55"


def free_port_block(count: int, step: int, avoid: int = 0) -> int:
    """A base port such that base, base+step, … base+(count-1)*step are all free (and
    none is ``avoid``). The search starts at a random block: two suites on one machine
    would otherwise both take the first free one before either binds it."""
    bases = list(range(20000, 60000, 1000))
    start = random.randrange(len(bases))
    for base in bases[start:] + bases[:start]:
        ports = [base + i * step for i in range(count)]
        if avoid not in ports and all(_free(p) for p in ports):
            return base
    raise RuntimeError("no block of free ports")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class Honcho:
    proc: subprocess.Popen[bytes]
    env: dict[str, str]
    base: int
    log: Path
    workdir: Path

    def port(self, process: str) -> int:
        """honcho's $PORT for a process: the base, +100 per process in Procfile order."""
        return self.base + 100 * PROCESSES.index(process)


@pytest.fixture(scope="module")
def honcho(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Honcho]:
    workdir = tmp_path_factory.mktemp("procfile")
    shutil.copy(REPO / "Procfile", workdir / "Procfile")  # a fresh copy: no var/ yet
    redis_port = free_port()
    base = free_port_block(len(PROCESSES), 100, avoid=redis_port)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",  # the venv, "activated"
        "REDIS_PORT": str(redis_port),
        "APPORTION_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "FLOWER_BASIC_AUTH": AUTH,
        "PYTHONUNBUFFERED": "1",
    }
    log = workdir / "honcho.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "honcho"), "start", "-p", str(base)],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running = Honcho(proc, env, base, log, workdir)
    try:
        yield running
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_the_procfile_starts_healthy_from_a_fresh_copy(honcho: Honcho) -> None:
    def healthy() -> bool:
        assert honcho.proc.poll() is None, honcho.log.read_text()[-3000:]
        return apportion("health", env=honcho.env).returncode == 0

    wait_until(healthy, 120, interval=1, what="every Procfile process up")

    assert (honcho.workdir / "var" / "redis").is_dir()  # made by the redis line itself
    report = json.loads(apportion("health", "--json", env=honcho.env).stdout)
    for queue in ("attach", "launch", "partition", "events"):
        assert report["queues"][queue]["workers"] == [f"{queue}@{socket.gethostname()}"]


def test_every_example_is_answered_by_its_queues_worker(honcho: Honcho) -> None:
    for name, path in example_jobs().items():
        proc = apportion("submit", kind_of(name), str(path), "--wait", env=honcho.env)
        assert proc.returncode == 0, (name, proc.stderr)
        assert json.loads(proc.stdout)["kind"] == kind_of(name)


def _get(url: str, auth: str | None = None) -> str:
    request = urllib.request.Request(url)
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    with urllib.request.urlopen(request, timeout=10) as response:
        text: str = response.read().decode()
        return text


def test_each_worker_serves_its_own_jobs_metrics_on_its_port(honcho: Honcho) -> None:
    partition = _get(f"http://127.0.0.1:{honcho.port('partition')}/metrics")
    attach = _get(f"http://127.0.0.1:{honcho.port('attach')}/metrics")

    assert 'apportion_jobs_total{code="",kind="partition",status="ok"}' in partition
    assert 'kind="auto_attach"' in attach
    assert 'kind="partition"' not in attach


def test_the_exporter_and_flower_with_its_credentials_are_up(honcho: Honcho) -> None:
    exported = _get(f"http://127.0.0.1:{honcho.port('metrics')}/metrics")
    partition = example_jobs()["partition"]

    def followed() -> bool:
        tasks = json.loads(_get(f"http://127.0.0.1:{honcho.port('flower')}/api/tasks", AUTH))
        if any(task["name"] == "apportion.partition" for task in tasks.values()):
            return True
        # Workers send task events once Flower has asked (every 5 s): one more job.
        apportion("submit", "partition", str(partition), "--wait", env=honcho.env)
        return False

    assert "apportion_redis_up 1.0" in exported
    wait_until(followed, 60, interval=1, what="Flower following a partition job")


def test_every_process_stops_on_sigterm(honcho: Honcho) -> None:
    os.killpg(honcho.proc.pid, signal.SIGTERM)

    assert honcho.proc.wait(60) is not None
    text = honcho.log.read_text()
    for process in PROCESSES:
        assert f"{process}.1" in text


def _compose() -> list[str] | None:
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_compose_validates_the_file_and_requires_flowers_credentials() -> None:
    compose = _compose()
    if compose is None:
        # scripts/test installs one (scripts/ensure-compose): CI always runs this check.
        if REQUIRE_REDIS:
            pytest.fail("no Compose CLI: scripts/ensure-compose installs docker-compose")
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    env = {**os.environ, "FLOWER_BASIC_AUTH": AUTH}
    env_without = {k: v for k, v in os.environ.items() if k != "FLOWER_BASIC_AUTH"}

    valid = subprocess.run([*compose, "config", "-q"], cwd=REPO, env=env, capture_output=True)
    resolved = subprocess.run([*compose, "config"], cwd=REPO, env=env, capture_output=True)
    refused = subprocess.run(
        [*compose, "config", "-q"], cwd=REPO, env=env_without, capture_output=True, text=True
    )

    sentinel = subprocess.run(
        [*compose, "--profile", "sentinel", "config"], cwd=REPO, env=env, capture_output=True
    )

    assert valid.returncode == 0, valid.stderr
    assert b"apportion health --queue partition" in resolved.stdout
    assert sentinel.returncode == 0, sentinel.stderr
    assert b"sentinel monitor apportion redis-primary 6379 2" in sentinel.stdout
    assert b"APPORTION_SENTINEL_MASTER: apportion" in sentinel.stdout
    assert refused.returncode != 0
    assert "set FLOWER_BASIC_AUTH" in refused.stderr
