"""Hostile jobs through a real worker: each is answered, the worker lives, the queue drains."""

from __future__ import annotations

import collections
import copy
import random
from typing import Any

import pytest
import redis
from celery import Celery

from apportion.workers.redis.keys import Keys
from tests.conftest import load_example
from tests.fuzz.hostile import HOSTILE_CONTAINERS, HOSTILE_SCALARS, paths, replaced
from tests.support.processes import Worker, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.slow]

EXAMPLES = {
    "auto_attach": "auto_attach.json",
    "guest_host_attach": "guest_host_attach.json",
    "launch_select": "launch_select.json",
    "partition": "partition.json",
    "launch_outcome": "launch_outcome.json",
}
JOBS = 300


def hostile_job(rng: random.Random, kind: str, n: int) -> dict[str, Any]:
    job: dict[str, Any] = copy.deepcopy(load_example(EXAMPLES[kind]))
    key = "event_id" if kind == "launch_outcome" else "job_id"
    job[key] = f"hostile-{kind}-{n}"
    for _ in range(rng.randint(1, 3)):
        candidates = [p for p in paths(job) if p[0] != key]
        value = rng.choice(HOSTILE_SCALARS + HOSTILE_CONTAINERS)
        if isinstance(value, str) and value.startswith("yaql"):
            value = "x"  # bombs are tested in-process; here the worker's survival matters
        job = replaced(job, rng.choice(candidates), copy.deepcopy(value))
    return job


def test_hundreds_of_hostile_jobs_are_answered_and_the_worker_keeps_serving(
    worker: Worker, producer: Celery, client: redis.Redis
) -> None:
    rng = random.Random(20261122)
    sent = []
    for n in range(JOBS):
        kind = rng.choice(sorted(EXAMPLES))
        sent.append(
            (kind, producer.send_task(f"apportion.{kind}", args=[hostile_job(rng, kind, n)]))
        )

    statuses = collections.Counter()
    for kind, result in sent:
        envelope = result.get(timeout=120)
        assert envelope["kind"] == kind
        assert envelope["status"] in ("ok", "infeasible", "rejected")
        if envelope["error"]:
            assert envelope["error"]["code"] != "internal_error", envelope["error"]
        statuses[envelope["status"]] += 1

    assert worker.alive
    assert statuses["rejected"] > JOBS // 3
    for queue in ("attach", "launch", "partition", "events"):
        assert client.llen(queue) == 0
    # The worker acknowledges just after storing the last result.
    wait_until(lambda: client.hlen("unacked") == 0, 10, what="every message acknowledged")
    published = sum(client.xlen(Keys().results_stream(k)) for k in EXAMPLES)
    assert published >= JOBS
