"""A real worker on real Redis: jobs in, envelopes and result events out."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import redis
from celery import Celery
from kombu import Connection, Exchange, Producer

from apportion.config.settings import Settings
from apportion.workers.producer import producer_app
from apportion.workers.redis.keys import Keys
from tests.conftest import load_example
from tests.integration.conftest import stream_job_ids
from tests.support.processes import RedisServer, Worker, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker]


def partition_job(job_id: str) -> dict[str, Any]:
    job: dict[str, Any] = load_example("partition.json")
    job["job_id"] = job_id
    return job


def test_a_partition_job_sent_by_name_comes_back_ok_and_is_published_once(
    worker: Worker, producer: Celery, client: redis.Redis, keys: Keys
) -> None:
    job_id = f"e2e-{uuid.uuid4()}"
    envelope = producer.send_task("apportion.partition", args=[partition_job(job_id)]).get(
        timeout=60
    )

    assert envelope["status"] == "ok"
    assert envelope["job_id"] == job_id
    sdb = next(d for d in envelope["result"]["disks"] if d["disk_id"] == "sdb")
    assert {s["space_id"]: s["size"] for s in sdb["spaces"]}["swap"] == 64
    entries = client.xrange(keys.results_stream("partition"))
    mine = [fields for _, fields in entries if fields[b"job_id"].decode() == job_id]
    assert len(mine) == 1
    assert mine[0][b"kind"] == b"partition"
    assert json.loads(mine[0][b"envelope"])["result"] == envelope["result"]


def test_the_same_job_id_sent_twice_publishes_one_result_event(
    worker: Worker, producer: Celery, client: redis.Redis, keys: Keys
) -> None:
    job_id = f"twice-{uuid.uuid4()}"
    for _ in range(2):
        producer.send_task("apportion.partition", args=[partition_job(job_id)]).get(timeout=60)

    assert stream_job_ids(client, keys.results_stream("partition")).count(job_id) == 1


def test_a_malformed_job_is_rejected_with_paths_and_the_worker_keeps_serving(
    worker: Worker, producer: Celery
) -> None:
    bad = {
        "job_id": f"bad-{uuid.uuid4()}",
        "schema": [{"id": "x", "type": "nope"}],
        "hardware": {"disks": []},
    }
    envelope = producer.send_task("apportion.partition", args=[bad]).get(timeout=60)

    assert envelope["status"] == "rejected"
    paths = {d["path"] for d in envelope["error"]["details"]}
    assert "schema[0].type" in paths
    assert "hardware.disks" in paths
    assert worker.alive
    good = producer.send_task("apportion.partition", args=[partition_job("after-bad")])
    assert good.get(timeout=60)["status"] == "ok"


def test_a_job_that_is_not_an_object_is_rejected_not_crashed(
    worker: Worker, producer: Celery
) -> None:
    envelope = producer.send_task("apportion.partition", args=[[1, 2, 3]]).get(timeout=60)

    assert envelope["status"] == "rejected"
    assert envelope["error"]["details"][0]["path"] == "$"
    assert worker.alive


def test_a_pickle_message_is_refused_and_never_executed(
    worker: Worker, redis_server: RedisServer, producer: Celery, client: redis.Redis, keys: Keys
) -> None:
    job_id = f"pickled-{uuid.uuid4()}"
    task_id = str(uuid.uuid4())
    with Connection(redis_server.url) as conn:
        Producer(conn).publish(
            [[partition_job(job_id)], {}, {}],
            exchange=Exchange("apportion", type="direct"),
            routing_key="partition",
            serializer="pickle",
            headers={
                "lang": "py",
                "task": "apportion.partition",
                "id": task_id,
                "argsrepr": "(...)",
                "kwargsrepr": "{}",
            },
        )

    # Refused at the gate, before kombu or Celery would unpickle anything: dead-lettered
    # with its reason (workers/broker/gate.py).
    wait_until(
        lambda: any(
            fields[b"reason"] == b"content_type" and fields[b"task_id"] == task_id.encode()
            for _, fields in client.xrange(keys.dead_letters_stream)
        ),
        30,
        what="the pickle message dead-lettered",
    )
    # Refused means removed: not left queued or unacknowledged to poison the queue.
    wait_until(
        lambda: (
            not any(task_id.encode() in v for v in client.hvals("unacked"))
            and client.llen("partition") == 0
        ),
        30,
        what="pickled message dropped",
    )
    # The worker still serves JSON jobs, and the pickled one never ran.
    assert (
        producer.send_task("apportion.partition", args=[partition_job("after-pickle")]).get(
            timeout=60
        )["status"]
        == "ok"
    )
    assert job_id not in stream_job_ids(client, keys.results_stream("partition"))
    assert worker.alive


def test_the_producer_app_sends_without_listening_and_still_gets_the_answer(
    worker: Worker, redis_server: RedisServer, client: redis.Redis
) -> None:
    app = producer_app(Settings(redis_url=redis_server.url))
    job_id = f"quiet-{uuid.uuid4()}"
    client.config_resetstat()

    sent = app.send_task("apportion.partition", args=[partition_job(job_id)])
    calls = client.info("commandstats")
    wait_until(lambda: client.exists(f"celery-task-meta-{sent.id}"), 60, what="the answer")
    envelope = sent.get(timeout=60)  # asked for after it was stored

    assert "cmdstat_subscribe" not in calls
    assert calls["cmdstat_lpush"]["calls"] == 1
    assert envelope["job_id"] == job_id
    assert envelope["status"] == "ok"
    app.close()
