"""Adding a job kind is one registry entry plus an engine function (tests/support/toy_kind.py).

Everything else — the task and its route, validation, the JSON Schema, the result
stream — follows from the entry, here through a real worker and Redis.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from apportion.config.celeryconfig import celery_config
from apportion.config.settings import Settings
from apportion.engine import run
from apportion.schemas import job_schema, result_schema
from apportion.workers.app import create_app
from tests.integration.conftest import stream_job_ids, worker_env
from tests.support.processes import RedisServer, Worker, running_worker

TOY_MODULES = '["tests.support.toy_kind"]'


@pytest.fixture
def toy_registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from apportion import kinds

    monkeypatch.setenv("APPORTION_KIND_MODULES", TOY_MODULES)
    yield
    # Unregistered, and forgotten by the import system, so the next test loads it anew.
    kinds.REGISTRY.pop("toy_sum", None)
    sys.modules.pop("tests.support.toy_kind", None)


@pytest.fixture
def toy_worker(redis_server: RedisServer, tmp_path: Path, toy_registered: None) -> Iterator[Worker]:
    env = worker_env(redis_server.url, APPORTION_KIND_MODULES=TOY_MODULES)
    with running_worker(env, tmp_path / "toy.log", queues="toy") as w:
        yield w


def test_a_registered_kind_is_routed_to_its_queue_with_its_time_limits(
    toy_registered: None,
) -> None:
    settings = Settings()
    conf = celery_config(settings)
    app = create_app(settings, broker="memory://", backend="cache+memory://")

    assert conf["task_routes"]["apportion.toy_sum"] == {"queue": "toy", "routing_key": "toy"}
    assert "toy" in {q.name for q in conf["task_queues"]}
    task = app.tasks["apportion.toy_sum"]
    assert (task.soft_time_limit, task.time_limit) == (5, 10)


def test_a_registered_kind_is_validated_and_documented(toy_registered: None) -> None:
    Settings()  # reads APPORTION_KIND_MODULES

    bad = run("toy_sum", {"numbers": []})
    assert bad.status == "rejected"
    assert bad.error is not None
    assert bad.error.details[0].path == "numbers"
    assert run("toy_sum", {"numbers": [1, 2]}).result == {"total": 3}
    assert job_schema("toy_sum")["properties"]["numbers"]["type"] == "array"
    envelope = result_schema("toy_sum")
    assert envelope["properties"]["kind"]["const"] == "toy_sum"
    assert envelope["$defs"]["ToySumResult"]["properties"]["total"]["type"] == "integer"


def test_a_registered_kind_is_answered_through_a_real_worker(
    toy_worker: Worker, redis_server: RedisServer
) -> None:
    producer = create_app(Settings(redis_url=redis_server.url))
    try:
        result = producer.send_task("apportion.toy_sum", args=[{"job_id": "t1", "numbers": [4, 5]}])
        envelope = result.get(timeout=30)
    finally:
        producer.close()

    assert envelope["status"] == "ok"
    assert envelope["result"] == {"total": 9}
    client = redis.Redis.from_url(redis_server.url)
    assert stream_job_ids(client, "apportion:results:toy_sum") == ["t1"]
