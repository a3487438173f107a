"""launch_select and launch_outcome through a real worker and the Redis history store."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from apportion.workers.redis.keys import Keys
from tests.integration.conftest import stream_job_ids, worker_env
from tests.support.processes import RedisServer, Worker, running_worker

pytestmark = [pytest.mark.redis, pytest.mark.worker]


def outcome(event_id: str, account: str, result: str = "failed") -> dict[str, Any]:
    return {
        "event_id": event_id,
        "account": account,
        "outcome": result,
        "at": datetime.now(UTC).isoformat(),
        "reason": "quota exceeded",
    }


def three_accounts(**extra: Any) -> dict[str, Any]:
    host = {"VCPU": {"total": 8}}
    return {
        "providers": [
            {"uuid": f"{a}-h", "account": a, "inventories": host} for a in extra.pop("names")
        ],
        "request": "resources=VCPU:1",
        "policy": [{"module": "equal"}, {"module": "failure_penalty"}],
        **extra,
    }


def test_a_launch_failure_event_is_recorded_once_per_event_id(
    worker: Worker, producer: Celery, client: redis.Redis, keys: Keys
) -> None:
    account = f"acct-{uuid.uuid4()}"
    event = outcome(f"evt-{uuid.uuid4()}", account)

    first = producer.send_task("apportion.launch_outcome", args=[event]).get(timeout=60)
    second = producer.send_task("apportion.launch_outcome", args=[event]).get(timeout=60)

    assert first["status"] == second["status"] == "ok"
    assert first["job_id"] == event["event_id"]
    assert first["result"]["recorded"] is True
    # The same event again gets the same answer again: the one on the result stream.
    assert second == first
    assert client.zcard(keys.failure_history(account)) == 1
    failures = [
        f
        for _, f in client.xrange(keys.launch_failures_stream)
        if f[b"event_id"].decode() == event["event_id"]
    ]
    assert len(failures) == 1
    assert (
        stream_job_ids(client, keys.results_stream("launch_outcome")).count(event["event_id"]) == 1
    )


def test_launch_select_without_failures_reads_the_history_store(
    worker: Worker, producer: Celery
) -> None:
    names = [f"{p}-{uuid.uuid4().hex[:6]}" for p in ("a", "b", "c")]
    for i in range(3):
        producer.send_task(
            "apportion.launch_outcome", args=[outcome(f"evt-{uuid.uuid4()}-{i}", names[1])]
        ).get(timeout=60)

    env = producer.send_task(
        "apportion.launch_select", args=[three_accounts(names=names, seed=1)]
    ).get(timeout=60)

    assert env["status"] == "ok"
    after_penalty = env["result"]["selection"]["trace"][1]["probabilities"]
    assert after_penalty[names[1]] == pytest.approx((1 / 3 - 0.15) / 0.85)
    assert env["result"]["extra"]["failures"][names[1]] == 3


@pytest.fixture(scope="module")
def launching_worker(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Worker]:
    url = f"redis://127.0.0.1:{redis_server.port}/2"
    env = worker_env(
        url,
        APPORTION_LAUNCHER="simulated",
        APPORTION_SIMULATED_FAILURE_RATES=json.dumps({"flaky": 1.0}),
    )
    log = tmp_path_factory.mktemp("launcher") / "worker.log"
    with running_worker(env, log) as w:
        yield w


def test_with_a_launcher_a_failed_launch_feeds_the_store_and_retries_elsewhere(
    launching_worker: Worker, redis_server: RedisServer, tmp_path: Path
) -> None:
    from apportion.config.settings import Settings
    from apportion.workers.app import create_app

    url = f"redis://127.0.0.1:{redis_server.port}/2"
    app = create_app(Settings(redis_url=url))
    client = redis.Redis(host="127.0.0.1", port=redis_server.port, db=2)
    job = three_accounts(
        names=["flaky", "steady"],
        job_id=f"launch-{uuid.uuid4()}",
        seed=0,
        accounts={"flaky": {"priority": 9}, "steady": {"priority": 1}},
    )
    job["policy"].append({"module": "priority", "mode": "strict"})

    env = app.send_task("apportion.launch_select", args=[job]).get(timeout=60)

    assert env["status"] == "ok"
    assert [(a["account"], a["ok"]) for a in env["result"]["attempts"]] == [
        ("flaky", False),
        ("steady", True),
    ]
    assert env["result"]["launched"] is True
    assert client.zcard(Keys().failure_history("flaky")) == 1
    [(_, entry)] = client.xrange(Keys().launch_failures_stream)
    assert entry[b"event_id"].decode() == f"{job['job_id']}/launch-1"
    app.close()
