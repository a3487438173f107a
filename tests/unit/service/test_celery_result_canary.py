"""Canary: the result the event's script stores is what Celery's Redis backend stores.

workers/results/celery_result.py writes a task's result into Celery's result backend
itself (with the result event, in one round trip), so it writes what Celery's
``_get_result_meta`` would (an internal): a Celery upgrade that changes that shape fails
here, naming it, instead of producers whose ``AsyncResult.get()`` misreads answers.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from celery import Celery, states

from apportion.workers.results.celery_result import can_record, success_record, success_value

ENVELOPE = {"job_id": "j-1", "kind": "partition", "status": "ok", "result": {"n": [1, 2]}}


@pytest.fixture
def app() -> Celery:
    url = "redis://127.0.0.1:1/0"  # never connected to
    celery = Celery("canary", broker=url, backend=url, set_as_current=False)
    celery.conf.update(result_serializer="json", accept_content=["json"], enable_utc=True)
    return celery


def test_the_stored_value_has_exactly_celerys_fields_for_a_success(app: Celery) -> None:
    ours = json.loads(success_value("task-1", json.dumps(ENVELOPE).encode()))
    # What a worker's task request looks like to the backend: no children, no group.
    request = SimpleNamespace(children=[], group=None, parent_id=None)
    celerys = app.backend._get_result_meta(ENVELOPE, states.SUCCESS, None, request)
    celerys["task_id"] = "task-1"

    assert set(ours) == set(celerys)
    assert {k: v for k, v in ours.items() if k != "date_done"} == {
        k: v for k, v in celerys.items() if k != "date_done"
    }
    assert datetime.fromisoformat(ours["date_done"]).tzinfo is not None


def test_celerys_backend_reads_the_stored_value_as_the_envelope(app: Celery) -> None:
    now = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    value = success_value("task-1", json.dumps(ENVELOPE).encode(), now)

    meta = app.backend.meta_from_decoded(app.backend.decode_result(value))

    assert meta["status"] == states.SUCCESS
    assert meta["result"] == ENVELOPE
    assert meta["task_id"] == "task-1"
    assert meta["date_done"] == now.isoformat()


def _task(app: Celery, **request: Any) -> Any:
    defaults = {"id": "task-1", "is_eager": False, "group": None, "parent_id": None}
    return SimpleNamespace(
        backend=app.backend, app=app, request=SimpleNamespace(**defaults | request)
    )


def test_the_record_goes_under_celerys_own_key_with_the_result_expiry(app: Celery) -> None:
    record = success_record(_task(app), b"{}", ttl=86_400)

    assert record.key == app.backend.get_key_for_task("task-1").decode()
    assert record.ttl == 86_400


@pytest.mark.parametrize(
    ("why", "request_fields", "same_redis"),
    [
        ("a task called by another task", {"parent_id": "p"}, True),
        ("a member of a group", {"group": "g"}, True),
        ("run eagerly", {"is_eager": True}, True),
        ("a backend on another Redis", {}, False),
    ],
)
def test_celery_stores_the_result_itself_for(
    app: Celery, why: str, request_fields: dict[str, Any], same_redis: bool
) -> None:
    assert can_record(_task(app), same_redis=True)
    assert not can_record(_task(app, **request_fields), same_redis=same_redis), why


def test_an_extended_result_is_left_to_celery(app: Celery) -> None:
    app.conf.result_extended = True

    assert not can_record(_task(app), same_redis=True)


def test_the_stored_date_is_what_celerys_json_writes_for_it() -> None:
    now = datetime(2026, 11, 25, 12, 0, 1, 250, tzinfo=UTC)

    value = success_value("task-1", b"{}", now)

    assert f'"date_done": {json.dumps(now.isoformat())}'.encode() in value
