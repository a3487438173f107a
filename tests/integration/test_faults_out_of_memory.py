"""Redis past ``maxmemory`` (``noeviction``) under two busy workers: an outage, never
the end of the fleet.

Every write that would grow Redis is refused with ``OOM``: a job's result cannot be
published, its retry message cannot be sent, and putting the message back on its queue
is refused too. The workers keep running; each job stays in the ``unacked`` hash (safe
if a worker died now) and goes back on its queue within seconds of Redis accepting
writes again, long before the visibility timeout (an hour here, the default).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from apportion.config.settings import Settings
from apportion.workers.app import create_app
from tests.acceptance.cli import apportion
from tests.conftest import NO_EVICTION, own_redis_server
from tests.integration.conftest import CELERY_TASK_LINES, worker_env
from tests.support.jobs import SMALL_PARTITION, event_counts, mixed_jobs, queued_and_unacked
from tests.support.processes import RedisServer, Worker, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.slow]

WEIGHTS = {"partition": 1, "launch_select_default_policy": 1, "auto_attach": 1}
KINDS = ("partition", "launch_select", "auto_attach")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    yield from own_redis_server(tmp_path / "redis", extra_args=NO_EVICTION)


@pytest.fixture
def workers(server: RedisServer, tmp_path: Path) -> Iterator[list[Worker]]:
    env = worker_env(server.url, **CELERY_TASK_LINES, APPORTION_VISIBILITY_TIMEOUT="3600")
    started = [Worker(env=env, logfile=tmp_path / f"worker{i}.log") for i in range(2)]
    try:
        for w in started:
            w.start()
        yield started
    finally:
        for w in started:
            w.stop()


def fill_up(admin: redis.Redis) -> None:
    """Written full, then maxmemory well below what the server uses: every write that
    would grow memory is refused until maxmemory is lifted (only the fill grows it)."""
    used = int(admin.info("memory")["used_memory"])
    admin.config_set("maxmemory", used + 256 * 1024)
    for i in range(10_000):
        try:
            admin.set(f"filler:{i}", "x" * 1024)
        except redis.exceptions.OutOfMemoryError:
            admin.config_set("maxmemory", used)
            return
    raise AssertionError("10 MB written under a 256 kB margin: maxmemory not enforced")


def refusals(workers: list[Worker]) -> int:
    return sum(w.log_text().count("Redis refused to requeue") for w in workers)


def test_out_of_memory_stops_no_worker_and_every_job_is_answered_once_memory_is_freed(
    server: RedisServer, workers: list[Worker]
) -> None:
    producer = create_app(Settings(redis_url=server.url))
    admin = server.client()
    jobs = mixed_jobs(20, "oom", WEIGHTS)
    for w in workers:
        w.pause()
    for job in jobs:
        producer.send_task(job.task_name, args=[job.payload])
    fill_up(admin)
    for w in workers:
        w.resume()

    # Each worker runs what it holds, cannot publish, cannot send a retry, cannot put
    # the message back: it keeps the message unacknowledged and takes no more.
    wait_until(lambda: refusals(workers) >= 4, 30, interval=0.2, what="jobs held by both")
    assert all("Redis refused to requeue" in w.log_text() for w in workers)
    # What an operator sees meanwhile: a report and an exit status, never a traceback.
    env = {"APPORTION_REDIS_URL": server.url}
    health = apportion("health", env=env, timeout=60)
    submitted = apportion("submit", "partition", "-", stdin=json.dumps(SMALL_PARTITION), env=env)
    # Out of memory for 10 s more: nobody exits, nothing is answered, nothing is lost.
    until = time.monotonic() + 10
    while time.monotonic() < until:
        assert all(w.alive for w in workers), [w.log_text()[-3000:] for w in workers]
        time.sleep(0.5)
    assert not any(event_counts(admin, KINDS).values())
    queued, unacked = queued_and_unacked(admin)
    assert queued + unacked == len(jobs)
    assert unacked >= 4

    assert health.returncode == 1, health.stdout + health.stderr
    assert "Traceback" not in health.stdout + health.stderr
    assert "Redis answered but refused: out of memory" in health.stdout
    assert submitted.returncode == 1
    assert "Traceback" not in submitted.stderr
    assert "answered but refused the job(s): out of memory" in submitted.stderr
    assert "cannot reach the broker" not in submitted.stderr

    admin.config_set("maxmemory", 0)
    freed = time.monotonic()

    def answered() -> int:
        counts = event_counts(admin, KINDS)
        return sum(1 for j in jobs if counts[j.key])

    wait_until(lambda: answered() == len(jobs), 30, interval=0.2, what="every job answered")
    seconds = time.monotonic() - freed
    assert max(event_counts(admin, KINDS).values()) == 1
    wait_until(lambda: queued_and_unacked(admin) == (0, 0), 10, what="nothing left unacked")
    assert all(w.alive for w in workers)
    for w in workers:
        assert "Unrecoverable error" not in w.log_text()
        assert "CRITICAL" not in w.log_text()
        assert "refreshing queue bindings" not in w.log_text()  # debug only, not a warning
    # Once Redis took writes again, the held jobs went back within seconds.
    assert any("Redis accepts writes again" in w.log_text() for w in workers)
    print(f"\n{len(jobs)} jobs answered {seconds:.1f} s after memory was freed")
    producer.close()
    admin.close()
