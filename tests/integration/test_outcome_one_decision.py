"""launch_outcome sent many times at once: the answers and the failure history agree.

Real workers (two, four pool children each, racing for the same event ids) and a real
Redis. The history records an event once per event_id, and the answer to every send
says what the history holds: the same content is answered ``recorded: true`` by every
send when the history holds it; of two contents for one event_id, the one the history
holds is answered ``recorded: true`` and the other ``rejected``/``duplicate_job_id``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
import redis
from celery import Celery
from celery.result import AsyncResult

from apportion.workers.redis.keys import Keys
from tests.integration.conftest import worker_env
from tests.support.processes import RedisServer, Worker, running_worker

pytestmark = [pytest.mark.redis, pytest.mark.worker]

TASK = "apportion.launch_outcome"


@pytest.fixture(scope="module")
def racing_workers(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Worker]]:
    logs = tmp_path_factory.mktemp("racing")
    env = worker_env(redis_server.url)
    with (
        running_worker(env, logs / "a.log", queues="events", concurrency=4) as a,
        running_worker(env, logs / "b.log", queues="events", concurrency=4) as b,
    ):
        yield [a, b]


def event(event_id: str, account: str) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "account": account,
        "outcome": "failed",
        "at": datetime.now(UTC).isoformat(),
        "reason": "no valid host",
    }


def answers(results: list[AsyncResult]) -> list[dict[str, Any]]:
    return [r.get(timeout=120) for r in results]


def held(client: redis.Redis, keys: Keys, account: str, event_id: str) -> bool:
    return client.zscore(keys.failure_history(account), event_id) is not None


def published(client: redis.Redis, keys: Keys, event_id: str) -> list[dict[str, Any]]:
    return [
        orjson.loads(fields[b"envelope"])
        for _, fields in client.xrange(keys.results_stream("launch_outcome"))
        if fields[b"job_id"].decode() == event_id
    ]


def test_a_hundred_identical_sends_are_all_answered_recorded_as_the_history_holds_it(
    racing_workers: list[Worker], producer: Celery, client: redis.Redis, keys: Keys
) -> None:
    for _ in range(10):
        account = f"acct-{uuid.uuid4().hex[:8]}"
        job = event(f"evt-{uuid.uuid4()}", account)

        got = answers([producer.send_task(TASK, args=[job]) for _ in range(100)])

        assert held(client, keys, account, job["event_id"])
        results = {orjson.dumps(a["result"], option=orjson.OPT_SORT_KEYS) for a in got}
        assert [a["status"] for a in got] == ["ok"] * 100
        assert len(results) == 1
        assert got[0]["result"]["recorded"] is True
        assert got[0]["result"]["skipped"] is None
        [event_on_stream] = published(client, keys, job["event_id"])
        assert event_on_stream["result"] == got[0]["result"]


def test_of_two_contents_for_one_event_id_the_one_the_history_holds_is_the_one_recorded(
    racing_workers: list[Worker], producer: Celery, client: redis.Redis, keys: Keys
) -> None:
    for _ in range(3):
        pairs = []
        for _ in range(150):
            event_id = f"evt-{uuid.uuid4()}"
            x, y = (f"acct-{uuid.uuid4().hex[:8]}" for _ in range(2))
            pairs.append(
                (
                    event_id,
                    (x, producer.send_task(TASK, args=[event(event_id, x)])),
                    (y, producer.send_task(TASK, args=[event(event_id, y)])),
                )
            )

        for event_id, *sends in pairs:
            outcomes = {account: result.get(timeout=120) for account, result in sends}
            holders = [a for a in outcomes if held(client, keys, a, event_id)]
            assert len(holders) == 1, (event_id, outcomes)
            [holder] = holders
            [other] = [a for a in outcomes if a != holder]
            won, lost = outcomes[holder], outcomes[other]
            assert won["status"] == "ok", (event_id, outcomes)
            assert won["result"]["recorded"] is True
            assert lost["status"] == "rejected", (event_id, outcomes)
            assert lost["error"]["code"] == "duplicate_job_id"
            [event_on_stream] = published(client, keys, event_id)
            assert event_on_stream["result"]["account"] == holder


def test_a_resend_after_the_published_marker_expired_still_says_what_the_history_holds(
    racing_workers: list[Worker], producer: Celery, client: redis.Redis, keys: Keys
) -> None:
    account = f"acct-{uuid.uuid4().hex[:8]}"
    job = event(f"evt-{uuid.uuid4()}", account)
    first = producer.send_task(TASK, args=[job]).get(timeout=60)
    other = producer.send_task(TASK, args=[event(job["event_id"], "someone-else")])
    client.delete(keys.published_marker("launch_outcome", job["event_id"]))

    again = producer.send_task(TASK, args=[job]).get(timeout=60)

    assert first["result"]["recorded"] is again["result"]["recorded"] is True
    assert other.get(timeout=60)["error"]["code"] == "duplicate_job_id"
    assert not held(client, keys, "someone-else", job["event_id"])
