"""A watched worker (task events on) sends every job's events, many to a Redis PUBLISH.

A real worker and redis-server: the worker runs with ``-E`` (what a Flower attached
asks for), 120 jobs go in at once, and a subscriber on the events' channels counts the
PUBLISHes while Celery's own event receiver collects the events.
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apportion.config.settings import Settings
from apportion.workers.producer import JobSender, producer_app
from tests.conftest import load_example, own_redis_server
from tests.integration.conftest import worker_env
from tests.support.processes import RedisServer, running_worker, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker]

JOBS = 120
TASK_EVENTS = ("task-received", "task-started", "task-succeeded")


@pytest.fixture
def fresh_redis(tmp_path: Path) -> Iterator[RedisServer]:
    yield from own_redis_server(tmp_path / "redis")


def _events_in(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The events one PUBLISH carried (kombu's envelope around one event or a batch)."""
    body = json.loads(message["data"])["body"]
    decoded = json.loads(base64.b64decode(body))
    return decoded if isinstance(decoded, list) else [decoded]


def test_a_watched_worker_sends_each_jobs_three_events_in_a_few_publishes(
    fresh_redis: RedisServer, tmp_path: Path
) -> None:
    app = producer_app(Settings(redis_url=fresh_redis.url))
    seen: Counter[str] = Counter()
    per_task: dict[str, set[str]] = {}
    lock = threading.Lock()

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] in TASK_EVENTS:
            with lock:
                seen[event["type"]] += 1
                per_task.setdefault(event["uuid"], set()).add(event["type"])

    publishes: list[int] = []  # task events per PUBLISH
    pubsub = fresh_redis.client().pubsub()
    pubsub.psubscribe("*celeryev*")
    stop = threading.Event()

    def count_publishes() -> None:
        while not stop.is_set():
            message = pubsub.get_message(timeout=0.2)
            if message and message["type"] == "pmessage":
                tasks = [e for e in _events_in(message) if e.get("type") in TASK_EVENTS]
                if tasks:
                    publishes.append(len(tasks))

    def receive() -> None:
        with app.connection() as connection:
            receiver = app.events.Receiver(connection, handlers={"*": on_event})
            # Until the connection closes at the end of the test.
            with contextlib.suppress(Exception):
                receiver.capture(limit=None, timeout=None, wakeup=False)

    counter = threading.Thread(target=count_publishes, daemon=True)
    counter.start()
    threading.Thread(target=receive, daemon=True).start()
    redis_client = fresh_redis.client()
    # Listening before the first event: the receiver's subscription is a second one
    # beside this test's own pattern.
    wait_until(
        lambda: redis_client.pubsub_numpat() >= 2 or bool(redis_client.pubsub_channels()),
        30,
        what="the event receiver subscribed",
    )

    env = worker_env(fresh_redis.url)
    with running_worker(env, tmp_path / "worker.log", extra_args=("-E",)):
        job = load_example("partition.json")
        with JobSender(app) as sender:
            sent = [
                sender.send("apportion.partition", {**job, "job_id": f"ev-{i}"})
                for i in range(JOBS)
            ]
        envelopes = [result.get(timeout=120) for result in sent]
        wait_until(lambda: seen["task-succeeded"] >= JOBS, 30, what="every task-succeeded event")
        wait_until(lambda: sum(publishes) >= 3 * JOBS, 30, what="every PUBLISH counted")
    stop.set()
    counter.join(5)
    app.close()

    assert {e["status"] for e in envelopes} == {"ok"}
    assert seen == dict.fromkeys(TASK_EVENTS, JOBS)
    assert {task.id for task in sent} == set(per_task)
    assert all(kinds == set(TASK_EVENTS) for kinds in per_task.values())
    assert sum(publishes) == 3 * JOBS
    # Celery alone publishes on every turn of its event loop, an event or two each;
    # batched, a slowed-down worker still sends several to a PUBLISH.
    assert len(publishes) <= 3 * JOBS / 2, f"{len(publishes)} PUBLISHes for {3 * JOBS} events"
