"""A heal_org job through a real worker reports its progress: an event every
APPORTION_HEAL_PROGRESS_EVERY consumers on the heal_org progress stream, before its one
answer on the result stream."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from apportion.config.settings import Settings
from apportion.workers.app import create_app
from apportion.workers.redis.keys import Keys
from tests.conftest import load_example, own_redis_server
from tests.integration.conftest import log_path, stream_job_ids, worker_env
from tests.support.processes import RedisServer, running_worker

pytestmark = [pytest.mark.redis, pytest.mark.worker]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    # A Redis of its own: no other test's worker may take the job.
    yield from own_redis_server(tmp_path / "redis")


def _heal_of(count: int) -> dict[str, Any]:
    job = load_example("heal_org.json")
    template = job["consumers"][0]
    consumers = [
        {**template, "consumer": {**template["consumer"], "uuid": f"server-{i}"}}
        for i in range(count)
    ]
    return {**job, "job_id": f"heal-progress-{uuid.uuid4()}", "consumers": consumers}


def _entries(client: redis.Redis, stream: str, job_id: str) -> list[tuple[str, dict[str, str]]]:
    return [
        (entry_id.decode(), {k.decode(): v.decode() for k, v in fields.items()})
        for entry_id, fields in client.xrange(stream)
        if fields[b"job_id"].decode() == job_id
    ]


def _order(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq)


def test_a_heal_through_a_worker_publishes_its_progress_every_n_consumers_before_its_answer(
    server: RedisServer, tmp_path: Path
) -> None:
    job = _heal_of(25)
    env = worker_env(server.url, APPORTION_HEAL_PROGRESS_EVERY="10")
    producer: Celery = create_app(Settings(redis_url=server.url))
    client = server.client()
    keys = Keys()

    try:
        with running_worker(env, log_path(tmp_path, "worker")):
            envelope = producer.send_task("apportion.heal_org", args=[job]).get(timeout=120)
        progress = _entries(client, keys.progress_stream("heal_org"), job["job_id"])
        answer = _entries(client, keys.results_stream("heal_org"), job["job_id"])
        on_results = stream_job_ids(client, keys.results_stream("heal_org"))
    finally:
        producer.close()
        client.close()

    assert envelope["status"] == "ok", envelope["error"]
    assert envelope["result"]["summary"]["answered"] == 25
    assert [fields for _, fields in progress] == [
        {
            "job_id": job["job_id"],
            "kind": "heal_org",
            "status": "progress",
            "consumers_done": str(done),
            "consumers_total": "25",
        }
        for done in (10, 20)
    ]
    # Both before the answer, which is the job's one entry on the result stream.
    assert on_results.count(job["job_id"]) == 1
    assert all(_order(entry_id) < _order(answer[0][0]) for entry_id, _ in progress)
