"""APPORTION_UNKNOWN_FIELDS=reject on a real worker: a job that does not say `strict` is
rejected for a misspelt field, naming its path and the name it meant; a job's own
`strict: false` is still answered, warned, and the misspelling is not in its result."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import Celery

from apportion.workers.redis.keys import Keys
from tests.conftest import load_example
from tests.integration.conftest import worker_env
from tests.support.processes import RedisServer, Worker, running_worker

pytestmark = [pytest.mark.redis, pytest.mark.worker]


@pytest.fixture(scope="module")
def worker(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    env = worker_env(redis_server.url, APPORTION_UNKNOWN_FIELDS="reject")
    with running_worker(env, log, queues="partition", concurrency=1) as w:
        yield w


def misspelt(job_id: str) -> dict[str, Any]:
    job: dict[str, Any] = load_example("partition.json")
    job["job_id"] = job_id
    job["schema"][3]["min_szie"] = 5  # a partition space: it keeps its extra keys
    return job


def test_a_worker_told_to_reject_unknown_fields_rejects_a_misspelt_space_field(
    worker: Worker, producer: Celery, client: redis.Redis, keys: Keys
) -> None:
    job_id = f"unknown-{uuid.uuid4()}"

    envelope = producer.send_task("apportion.partition", args=[misspelt(job_id)]).get(timeout=60)

    assert envelope["status"] == "rejected"
    assert envelope["error"]["code"] == "unknown_field"
    assert envelope["error"]["details"] == [
        {
            "path": "schema[3].min_szie",
            "message": "unknown field 'min_szie'; did you mean 'min_size'?",
        }
    ]
    published = [
        json.loads(fields[b"envelope"])
        for _, fields in client.xrange(keys.results_stream("partition"))
        if fields[b"job_id"].decode() == job_id
    ]
    assert [e["status"] for e in published] == ["rejected"]


def test_a_job_saying_strict_false_is_answered_by_that_worker_without_echoing_the_misspelling(
    worker: Worker, producer: Celery
) -> None:
    job = misspelt(f"lenient-{uuid.uuid4()}") | {"strict": False}

    envelope = producer.send_task("apportion.partition", args=[job]).get(timeout=60)

    assert envelope["status"] == "ok"
    assert [w["path"] for w in envelope["warnings"]] == ["schema[3].min_szie"]
    assert "min_szie" not in json.dumps(envelope["result"])
    assert worker.alive
