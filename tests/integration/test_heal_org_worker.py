"""A heal_org job through a real worker on real Redis is answered as `apportion solve`
answers it, and its result is published once on the heal_org result stream."""

from __future__ import annotations

import json
import uuid

import pytest
import redis
from celery import Celery

from apportion.workers.redis.keys import Keys
from tests.acceptance.cli import apportion, output_json
from tests.conftest import load_example
from tests.integration.conftest import stream_job_ids
from tests.support.processes import Worker

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
