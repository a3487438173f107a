"""Messages that are not our JSON contract are refused with a log line, never executed,
and never poison the queue: the next job is served normally."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import redis
from celery import Celery

from apportion.workers.redis.keys import Keys
from tests.conftest import load_example
from tests.integration.conftest import stream_job_ids
from tests.support.processes import Worker, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker]


def message(task: str, body: bytes, content_type: str = "application/json") -> dict[str, Any]:
    task_id = str(uuid.uuid4())
    return {
        "body": base64.b64encode(body).decode(),
        "content-encoding": "utf-8",
        "content-type": content_type,
        "headers": {
            "lang": "py",
            "task": task,
            "id": task_id,
            "root_id": task_id,
            "parent_id": None,
            "group": None,
            "retries": 0,
            "timelimit": [None, None],
            "argsrepr": "…",
            "kwargsrepr": "{}",
        },
        "properties": {
            "correlation_id": task_id,
            "reply_to": "",
            "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": "partition"},
            "priority": 0,
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
        },
    }


def job_body(job_id: str) -> bytes:
    job = {**load_example("partition.json"), "job_id": job_id}
    return json.dumps([[job], {}, {}]).encode()


def still_serving(producer: Celery) -> None:
    job = {**load_example("partition.json"), "job_id": f"after-{uuid.uuid4()}"}
    envelope = producer.send_task("apportion.partition", args=[job]).get(timeout=60)
    assert envelope["status"] == "ok"


def queue_drained(client: redis.Redis) -> Callable[[], bool]:
    return lambda: client.llen("partition") == 0 and client.hlen("unacked") == 0


@pytest.mark.parametrize(
    ("case", "build", "log_line"),
    [
        (
            "unknown task name",
            lambda jid: message("apportion.horoscope", job_body(jid)),
            "Received unregistered task of type 'apportion.horoscope'",
        ),
        (
            "garbage body",
            lambda jid: message("apportion.partition", b"\x00\xff{not json" + jid.encode()),
            "Can't decode message body",
        ),
        (
            "yaml content type",
            lambda jid: message("apportion.partition", job_body(jid), "application/x-yaml"),
            "Refusing to deserialize untrusted content of type yaml",
        ),
    ],
)
def test_a_message_outside_the_contract_is_refused_logged_and_dropped(
    worker: Worker,
    producer: Celery,
    client: redis.Redis,
    keys: Keys,
    case: str,
    build: Callable[[str], dict[str, Any]],
    log_line: str,
) -> None:
    job_id = f"hostile-{uuid.uuid4()}"
    client.lpush("partition", json.dumps(build(job_id)))

    wait_until(lambda: log_line in worker.log_text(), 30, what=f"{case} logged")
    wait_until(queue_drained(client), 30, what="message dropped, not requeued")
    still_serving(producer)
    assert job_id not in stream_job_ids(client, keys.results_stream("partition"))
    assert worker.alive
