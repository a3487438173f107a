"""A heal_org job through a real worker on real Redis is answered as `apportion solve`
answers it, and its result is published once on the heal_org result stream."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from apportion.workers.redis.keys import Keys
from tests.acceptance.cli import apportion, output_json
from tests.conftest import load_example
from tests.integration.conftest import log_path, stream_job_ids, worker_env
from tests.support.processes import RedisServer, Worker, running_worker

pytestmark = [pytest.mark.redis, pytest.mark.worker]


def test_a_heal_org_job_through_a_worker_is_answered_as_solve_answers_it(
    worker: Worker, producer: Celery, client: redis.Redis, keys: Keys
) -> None:
    job = {**load_example("heal_org.json"), "job_id": f"heal-{uuid.uuid4()}"}

    envelope = producer.send_task("apportion.heal_org", args=[job]).get(timeout=120)
    solved = apportion("solve", "heal_org", "-", stdin=json.dumps(job))

    assert solved.returncode == 0, solved.stderr
    assert envelope["status"] == "ok", envelope["error"]
    assert envelope["result"] == output_json(solved)["result"]
    # The example's estate: the third server finds the stack used up, the second guest
    # the host-bound pool.
    quantities = [c["pool_quantities"] for c in envelope["result"]["consumers"]]
    assert quantities == [
        {"rhel-2s": 2},
        {"rhel-2s": 4},
        {"rhel-unlimited-sockets": 1},
        {"rhel-guests-of-host-1": 1},
        {},
    ]
    assert stream_job_ids(client, keys.results_stream("heal_org")).count(job["job_id"]) == 1


def _heal_of(count: int) -> dict[str, Any]:
    job = load_example("heal_org.json")
    template = job["consumers"][0]
    consumers = [
        {**template, "consumer": {**template["consumer"], "uuid": f"server-{i}"}}
        for i in range(count)
    ]
    return {**job, "job_id": f"heal-progress-{uuid.uuid4()}", "consumers": consumers}


def test_a_heal_through_a_worker_publishes_its_progress_every_n_consumers_before_its_answer(
    redis_server: RedisServer, tmp_path: Path, producer: Celery, client: redis.Redis, keys: Keys
) -> None:
    job = _heal_of(25)
    env = worker_env(redis_server.url, APPORTION_HEAL_PROGRESS_EVERY="10")

    with running_worker(env, log_path(tmp_path, "progress")):
        envelope = producer.send_task("apportion.heal_org", args=[job]).get(timeout=120)

    assert envelope["status"] == "ok", envelope["error"]
    assert envelope["result"]["summary"]["answered"] == 25
    events = [
        {k.decode(): v.decode() for k, v in fields.items()}
        for _, fields in client.xrange(keys.progress_stream("heal_org"))
    ]
    mine = [e for e in events if e["job_id"] == job["job_id"]]
    assert mine == [
        {
            "job_id": job["job_id"],
            "kind": "heal_org",
            "status": "progress",
            "consumers_done": str(done),
            "consumers_total": "25",
        }
        for done in (10, 20)
    ]
    # The progress came before the answer, and the result stream holds the answer alone.
    answer_id = next(
        entry_id
        for entry_id, fields in client.xrange(keys.results_stream("heal_org"))
        if fields[b"job_id"].decode() == job["job_id"]
    )
    progress_ids = [
        entry_id
        for entry_id, fields in client.xrange(keys.progress_stream("heal_org"))
        if fields[b"job_id"].decode() == job["job_id"]
    ]
    assert all(_stream_id(p) < _stream_id(answer_id) for p in progress_ids)
    assert stream_job_ids(client, keys.results_stream("heal_org")).count(job["job_id"]) == 1


def _stream_id(entry_id: bytes) -> tuple[int, int]:
    ms, _, seq = entry_id.decode().partition("-")
    return int(ms), int(seq)
