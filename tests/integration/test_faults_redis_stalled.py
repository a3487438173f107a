"""Redis stopped (SIGSTOP: a stall, as behind a slow disk or a long ``KEYS``) while a
valid job waits on it: the time it waits is Redis's, never the job's. The job is
answered ``ok`` once Redis is back, not ``rejected``/``time_limit``.

The job reads the policy store in a pool child while Redis is stopped for longer than
its soft time limit. The worker's main loop, blocked on Redis too, fires the limit the
moment Redis comes back, while the child still waits for its reply: a limit that fires
while the task is inside a Redis call, or for time the engine did not spend, is retried.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apportion.config.settings import Settings
from apportion.workers.app import create_app
from tests.integration.conftest import CELERY_TASK_LINES, worker_env
from tests.support.jobs import _example
from tests.support.processes import RedisServer, Worker, free_port, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.slow]

SOFT, HARD = 3, 5
STALL = SOFT + 3.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    srv = RedisServer(port=free_port(), workdir=tmp_path / "redis")
    srv.start()
    try:
        yield srv
    finally:
        if srv.proc is not None:
            os.kill(srv.proc.pid, signal.SIGCONT)
        srv.stop()


@pytest.fixture
def worker(server: RedisServer, tmp_path: Path) -> Iterator[Worker]:
    env = worker_env(
        server.url,
        **CELERY_TASK_LINES,
        APPORTION_TIME_LIMITS__LAUNCH__SOFT=str(SOFT),
        APPORTION_TIME_LIMITS__LAUNCH__HARD=str(HARD),
    )
    # One pool child: its one job fills the prefetch, so the main process sends no more
    # Redis commands of its own and its timers fire on time while Redis is stopped.
    w = Worker(env=env, logfile=tmp_path / "worker.log", queues="launch", concurrency=1)
    w.start()
    try:
        yield w
    finally:
        w.stop()


def big_job(copies: int = 200) -> dict[str, Any]:
    """A valid launch_select job of ``copies`` compute nodes (a few hundred ms of engine
    work), with no ``policy`` key: the policy store decides."""
    job = _example("launch_select.candidates.json")
    del job["policy"]
    job["job_id"] = "stalled-1"
    base = list(job["providers"])
    for n in range(copies):
        for provider in base:
            copy = json.loads(json.dumps(provider))
            copy["uuid"] = copy["name"] = f"{provider['uuid']}-{n}"
            if provider["parent_provider_uuid"]:
                copy["parent_provider_uuid"] = f"{provider['parent_provider_uuid']}-{n}"
            job["providers"].append(copy)
    return job


def test_a_valid_job_waiting_on_a_stopped_redis_past_its_soft_limit_is_answered_ok(
    server: RedisServer, worker: Worker
) -> None:
    producer = create_app(Settings(redis_url=server.url))
    admin = server.client()
    assert server.proc is not None
    job = big_job()
    # Redis stops as the job reaches the pool child, which spends a moment on the job
    # before its first Redis call: the policy store's read (no ``policy`` in the job).
    result = producer.send_task("apportion.launch_select", args=[job])
    wait_until(lambda: f"[{result.id}] received" in worker.log_text(), 30, 0.01, "received")
    os.kill(server.proc.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    wait_until(lambda: time.monotonic() - stopped >= STALL, STALL + 1, what="the stall")
    os.kill(server.proc.pid, signal.SIGCONT)

    envelope = result.get(timeout=60)

    assert envelope["status"] == "ok", envelope
    assert envelope["job_id"] == job["job_id"]
    assert worker.alive
    stream = admin.xrange("apportion:results:launch_select")
    assert [fields[b"status"] for _, fields in stream] == [b"ok"]
    producer.close()
    admin.close()
