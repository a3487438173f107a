"""``apportion submit``'s sender on a real redis-server, then a real worker answering.

The sender leaves out the queue declaration Celery repeats on every send: these tests
show a job still reaches a queue no worker has declared yet, costing Redis one LPUSH.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apportion.config.settings import Settings
from apportion.workers.producer import JobSender, args_preview, producer_app
from tests.conftest import load_example, own_redis_server
from tests.integration.conftest import worker_env
from tests.support.processes import RedisServer, running_worker

pytestmark = [pytest.mark.redis, pytest.mark.worker]


@pytest.fixture
def fresh_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server no worker has used: no queue declared, no binding."""
    yield from own_redis_server(tmp_path / "redis")


def _job(job_id: str) -> dict[str, Any]:
    job: dict[str, Any] = load_example("partition.json")
    job["job_id"] = job_id
    return job


def test_jobs_sent_before_any_worker_wait_in_their_queue_and_are_answered(
    fresh_redis: RedisServer, tmp_path: Path
) -> None:
    client = fresh_redis.client()
    app = producer_app(Settings(redis_url=fresh_redis.url))
    jobs = [_job(f"sender-{i}") for i in range(3)]
    client.config_resetstat()

    with JobSender(app) as sender:
        sent = [sender.send("apportion.partition", job) for job in jobs]

    calls = client.info("commandstats")
    assert calls["cmdstat_lpush"]["calls"] == 3
    assert not {"cmdstat_sadd", "cmdstat_smembers", "cmdstat_subscribe"} & set(calls)
    assert client.llen("partition") == 3
    queued = json.loads(client.lindex("partition", -1))  # the first one sent
    assert queued["headers"]["task"] == "apportion.partition"
    assert queued["headers"]["argsrepr"] == args_preview(jobs[0])
    assert queued["headers"]["kwargsrepr"] == "{}"
    assert json.loads(base64.b64decode(queued["body"]))[0] == [jobs[0]]

    with running_worker(worker_env(fresh_redis.url), tmp_path / "worker.log"):
        envelopes = [result.get(timeout=60) for result in sent]

    assert [e["job_id"] for e in envelopes] == ["sender-0", "sender-1", "sender-2"]
    assert {e["status"] for e in envelopes} == {"ok"}
    app.close()


def test_a_sender_used_without_with_still_sends_each_job(fresh_redis: RedisServer) -> None:
    client = fresh_redis.client()
    app = producer_app(Settings(redis_url=fresh_redis.url))
    sender = JobSender(app)

    result = sender.send("apportion.partition", _job("unheld"))

    assert client.llen("partition") == 1
    queued = json.loads(client.lindex("partition", 0))
    assert queued["headers"]["id"] == result.id
    app.close()


def test_a_plain_job_is_sent_as_the_same_call_and_answered_as_the_same_job(
    fresh_redis: RedisServer, tmp_path: Path
) -> None:
    client = fresh_redis.client()
    app = producer_app(Settings(redis_url=fresh_redis.url))
    job = _job("plain")
    job["schema"][1]["min_size"] = 1.5e-05  # orjson writes 1.5e-5, json 1.5e-05

    with JobSender(app) as sender:
        by_kombu = sender.send("apportion.partition", job)
        by_orjson = sender.send("apportion.partition", job, plain=True)

    kombus, orjsons = (json.loads(item) for item in client.lrange("partition", 0, -1)[::-1])
    assert orjsons["content-type"] == kombus["content-type"] == "application/json"
    assert orjsons["headers"]["argsrepr"] == kombus["headers"]["argsrepr"]
    bodies = [base64.b64decode(message["body"]) for message in (kombus, orjsons)]
    assert bodies[0] != bodies[1]  # kombu writes ", " and 1.5e-05
    assert (
        json.loads(bodies[1])
        == json.loads(bodies[0])
        == [
            [job],
            {},
            {"callbacks": None, "errbacks": None, "chain": None, "chord": None},
        ]
    )

    with running_worker(worker_env(fresh_redis.url), tmp_path / "worker.log"):
        envelopes = [result.get(timeout=60) for result in (by_kombu, by_orjson)]

    assert envelopes[0]["status"] == "ok"
    assert envelopes[1]["result"] == envelopes[0]["result"]
    app.close()
