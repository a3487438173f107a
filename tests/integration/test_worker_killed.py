"""SIGKILL a worker while jobs are queued and running: none lost, none duplicated."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
from celery.result import AsyncResult

from apportion.config.settings import Settings
from apportion.workers.app import create_app
from apportion.workers.redis.keys import Keys
from tests.conftest import load_example
from tests.integration.conftest import short_redelivery, stream_job_ids, worker_env
from tests.support.processes import RedisServer, Worker, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.slow]

JOBS = 300
# Short enough to redeliver within the test, longer than every hard limit (Settings checks).
SHORT_LIMITS = short_redelivery(visibility=6, soft=3, hard=4)


def test_a_worker_killed_mid_run_loses_no_job_and_duplicates_no_event(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    url = f"redis://127.0.0.1:{redis_server.port}/1"
    client = redis_server.client()
    client.execute_command("SELECT", 1)
    client.flushdb()
    stream = Keys().results_stream("partition")
    env = worker_env(url, **SHORT_LIMITS)
    producer = create_app(Settings(redis_url=url))

    job = load_example("partition.json")
    # Every job is queued before the worker starts: sent while it runs, a loaded machine's
    # slow producer could let it finish them all before the kill, and nothing would be
    # left to redeliver.
    results = [
        producer.send_task("apportion.partition", args=[{**job, "job_id": f"kill-{i}"}])
        for i in range(JOBS)
    ]
    first = Worker(env=env, logfile=tmp_path / "first.log")
    first.start()
    wait_until(lambda: client.xlen(stream) >= 20, 60, what="first results")
    first.kill()
    done_before_kill = client.xlen(stream)
    # The kill left work behind: queued messages and/or unacknowledged deliveries.
    assert done_before_kill < JOBS
    assert client.llen("partition") + client.hlen("unacked") > 0

    second = Worker(env=env, logfile=tmp_path / "second.log")
    second.start()
    try:
        envelopes = [AsyncResult(r.id, app=producer).get(timeout=120) for r in results]
    finally:
        second.stop()

    assert all(e["status"] == "ok" for e in envelopes)
    counts = collections.Counter(stream_job_ids(client, stream))
    assert set(counts) == {f"kill-{i}" for i in range(JOBS)}
    assert max(counts.values()) == 1
    producer.close()
