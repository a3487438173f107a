"""No queue item can stop a worker (issue 13, item 1), through real workers and Redis.

Each item below used to kill the worker's main process (or, for the item without
``properties``, stall it for good), and a killed worker's message was restored and
killed the next one. Now each is dead-lettered with its reason and acknowledged, a
job nested 600 levels deep is answered ``rejected``/``too_deep``, and a fresh worker
started on a queue still holding every one of them stays up and answers the next job.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from apportion.config.settings import Settings
from apportion.workers.app import create_app
from apportion.workers.redis.keys import Keys
from tests.conftest import load_example
from tests.fuzz.hostile import nested
from tests.integration.conftest import stream_job_ids, worker_env
from tests.support.processes import REPO, RedisServer, Worker, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.slow]

KEYS = Keys()


def celery_message(
    body: Any, *, task: str = "apportion.partition", content_type: str = "application/json"
) -> dict[str, Any]:
    """A protocol-2 message as a producer in another language would LPUSH it."""
    task_id = str(uuid.uuid4())
    if not isinstance(body, str | dict | list):
        body = base64.b64encode(body).decode()
    return {
        "body": body,
        "content-encoding": "utf-8",
        "content-type": content_type,
        "headers": {"lang": "py", "task": task, "id": task_id, "argsrepr": "…"},
        "properties": {
            "correlation_id": task_id,
            "delivery_info": {"exchange": "apportion", "routing_key": "partition"},
            "priority": 0,
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
        },
    }


def call(*args: Any) -> bytes:
    return json.dumps([list(args), {}, {}]).encode()


def without(message: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k != key}


def with_(message: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    return {**message, key: value}


def job(job_id: str) -> dict[str, Any]:
    return {**load_example("partition.json"), "job_id": job_id}


# name → (the raw queue item, the reason it is dead-lettered for)
ITEMS: dict[str, tuple[Callable[[], bytes], str]] = {
    "not JSON": (lambda: b"\x00\xff{not json at all", "not_json"),
    "a JSON array": (lambda: json.dumps([1, 2, 3]).encode(), "not_a_message"),
    "properties null": (
        lambda: json.dumps(with_(celery_message(call(job("x"))), "properties", None)).encode(),
        "bad_properties",
    ),
    "headers a string": (
        lambda: json.dumps(with_(celery_message(call(job("x"))), "headers", "oops")).encode(),
        "bad_headers",
    ),
    "body a JSON object": (
        lambda: json.dumps(celery_message({"args": [job("x")]})).encode(),
        "bad_body",
    ),
    "body not base64": (
        lambda: json.dumps(celery_message("%%% not base64 %%%")).encode(),
        "bad_body",
    ),
    "body not [args, kwargs, embed]": (
        lambda: json.dumps(celery_message(json.dumps({"job": job("x")}).encode())).encode(),
        "not_a_task_call",
    ),
    "no properties": (
        lambda: json.dumps(without(celery_message(call(job("x"))), "properties")).encode(),
        "bad_properties",
    ),
    "a pickle": (
        lambda: json.dumps(
            celery_message(b"\x80\x04N.", content_type="application/x-python-serialize")
        ).encode(),
        "content_type",
    ),
    "an unknown task": (
        lambda: json.dumps(celery_message(call(job("x")), task="apportion.horoscope")).encode(),
        "unknown_task",
    ),
    "a YAML body": (
        lambda: json.dumps(celery_message(b"- 1\n", content_type="application/x-yaml")).encode(),
        "content_type",
    ),
}


@pytest.fixture
def db(redis_server: RedisServer) -> Iterator[tuple[str, redis.Redis]]:
    url = f"redis://127.0.0.1:{redis_server.port}/7"
    client = redis.Redis.from_url(url, socket_timeout=5)
    client.flushdb()
    yield url, client
    client.close()


@pytest.fixture
def producer(db: tuple[str, redis.Redis]) -> Iterator[Celery]:
    app = create_app(Settings(redis_url=db[0]))
    yield app
    app.close()


def dead_letters(client: redis.Redis) -> list[dict[bytes, bytes]]:
    return [fields for _, fields in client.xrange(KEYS.dead_letters_stream)]


def push_every_item(client: redis.Redis) -> None:
    for make, _ in ITEMS.values():
        client.lpush("partition", make())


def all_buried(client: redis.Redis, rounds: int) -> Callable[[], bool]:
    return lambda: len(dead_letters(client)) >= rounds * len(ITEMS)


def answers_the_next_job(producer: Celery, client: redis.Redis) -> None:
    job_id = f"next-{uuid.uuid4()}"
    envelope = producer.send_task("apportion.partition", args=[job(job_id)]).get(timeout=60)
    assert envelope["status"] == "ok"
    assert job_id in stream_job_ids(client, KEYS.results_stream("partition"))
    # The answer is out just before the worker acknowledges the job: stopping the worker
    # in between would give the job back (acks late), which is not what is tested here.
    wait_until(lambda: client.hlen("unacked") == 0, 10, what="the job acknowledged")


def test_no_malformed_queue_item_stops_a_worker_and_a_fresh_worker_answers_the_next_job(
    db: tuple[str, redis.Redis], producer: Celery, tmp_path: Path
) -> None:
    url, client = db
    env = worker_env(url)

    # 1. Items arriving while a worker waits idle (its BRPOP takes them).
    first = Worker(env=env, logfile=tmp_path / "first.log", queues="partition")
    first.start()
    try:
        push_every_item(client)
        wait_until(all_buried(client, 1), 60, what="every item dead-lettered")
        assert first.alive
        answers_the_next_job(producer, client)
    finally:
        first.stop()

    # 2. Items already waiting when a fresh worker starts (its pop script takes them).
    push_every_item(client)
    fresh = Worker(env=env, logfile=tmp_path / "fresh.log", queues="partition")
    fresh.start()
    try:
        wait_until(all_buried(client, 2), 60, what="every waiting item dead-lettered")
        answers_the_next_job(producer, client)
        assert fresh.alive
        assert "Unrecoverable error" not in fresh.log_text()
    finally:
        fresh.stop()

    reasons = [fields[b"reason"].decode() for fields in dead_letters(client)]
    expected = [reason for _, reason in ITEMS.values()]
    assert sorted(reasons) == sorted(expected * 2)
    # Acknowledged: nothing left queued or unacknowledged to be redelivered.
    assert client.llen("partition") == 0
    assert client.hlen("unacked") == 0


def test_a_dead_letter_keeps_the_item_its_reason_and_the_task_it_named(
    db: tuple[str, redis.Redis], tmp_path: Path
) -> None:
    url, client = db
    message = celery_message(call(job("x")), task="apportion.horoscope")
    client.lpush("partition", json.dumps(message))

    with_worker = Worker(env=worker_env(url), logfile=tmp_path / "w.log", queues="partition")
    with_worker.start()
    try:
        wait_until(lambda: dead_letters(client), 60, what="the item dead-lettered")
    finally:
        with_worker.stop()

    [fields] = dead_letters(client)
    assert fields[b"reason"] == b"unknown_task"
    assert fields[b"queue"] == b"partition"
    assert fields[b"task"] == b"apportion.horoscope"
    assert fields[b"task_id"] == message["headers"]["id"].encode()
    assert json.loads(fields[b"message"]) == message


def test_a_job_nested_600_deep_sent_with_apportion_submit_is_rejected_too_deep(
    db: tuple[str, redis.Redis], tmp_path: Path
) -> None:
    url, client = db
    deep = job(f"deep-{uuid.uuid4()}")
    deep["hardware"]["extra"] = nested(600)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(deep))
    env = worker_env(url)

    worker = Worker(env=env, logfile=tmp_path / "w.log", queues="partition")
    worker.start()
    try:
        submitted = subprocess.run(
            [sys.executable, "-m", "apportion.cli", "submit", "partition", str(path), "--wait"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
            env={**os.environ, **env},
            check=False,
        )
        assert worker.alive
    finally:
        worker.stop()

    assert submitted.returncode == 4, submitted.stderr
    envelope = json.loads(submitted.stdout)
    assert envelope["job_id"] == deep["job_id"]
    assert envelope["error"]["code"] == "too_deep"
    assert envelope["error"]["details"][0]["path"].startswith("hardware.extra")
    assert "APPORTION_LIMITS__MAX_JSON_DEPTH" in envelope["error"]["message"]
    assert stream_job_ids(client, KEYS.results_stream("partition")) == [deep["job_id"]]


def test_requeue_refuses_every_item_that_can_never_run_and_says_why(
    db: tuple[str, redis.Redis], tmp_path: Path
) -> None:
    url, client = db
    env = worker_env(url)
    worker = Worker(env=env, logfile=tmp_path / "w.log", queues="partition")
    worker.start()
    try:
        push_every_item(client)
        wait_until(all_buried(client, 1), 60, what="every item dead-lettered")
    finally:
        worker.stop()

    outcomes: dict[str, tuple[int, str]] = {}
    for entry_id, fields in client.xrange(KEYS.dead_letters_stream):
        requeued = subprocess.run(
            [sys.executable, "-m", "apportion.cli", "dead-letters", "--requeue", entry_id.decode()],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
            env={**os.environ, **env},
            check=False,
        )
        outcomes[fields[b"reason"].decode()] = (requeued.returncode, requeued.stderr)

    # Only the message naming a task this worker lacks may run (once a worker has it).
    assert {reason for reason, (code, _) in outcomes.items() if code == 0} == {"unknown_task"}
    for reason, (code, stderr) in outcomes.items():
        if reason != "unknown_task":
            assert code == 1, (reason, stderr)
            assert f"was dead-lettered as {reason} (" in stderr
            assert "it can never run" in stderr
            assert "Traceback" not in stderr
    assert client.llen("partition") == 1  # the one requeued, nothing else
    left = {fields[b"reason"].decode() for _, fields in client.xrange(KEYS.dead_letters_stream)}
    assert left == set(outcomes) - {"unknown_task"}
