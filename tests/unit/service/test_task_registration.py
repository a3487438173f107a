"""What the registered job tasks look like to Celery (no broker needed)."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest
from celery.utils.saferepr import saferepr

from apportion.config.settings import Settings
from apportion.engine import Context, run
from apportion.tasks import jobs
from apportion.workers.app import create_app
from apportion.workers.history.failure_store import MemoryFailureStore
from apportion.workers.observe import PREVIEW_MAX, Answer
from apportion.workers.results.publisher import MemoryPublisher
from apportion.workers.runtime import Runtime, set_runtime

SMALL = {
    "job_id": "6f1c2a9e-4b7d-4c1e-9a53-2f0e8d7b1c44",
    "schema": [
        {"id": "os", "type": "vg", "contains": [{"id": "root"}, {"id": "swap"}]},
        {"id": "root", "type": "lv", "min_size": 5000, "mount": "/"},
        {"id": "swap", "type": "lv", "size": 2048},
    ],
    "hardware": {"disks": [{"id": "sda", "size": 40000}]},
}


def test_what_celery_shows_of_a_result_is_a_short_preview_led_by_the_status() -> None:
    app = create_app(Settings(), broker="memory://", backend="cache+memory://")
    task = app.tasks["apportion.partition"]
    envelope = run("partition", SMALL, Context()).as_dict()

    # What Celery logs and sends in task-succeeded (Flower's result text) for the value
    # a job task returns: an Answer holding the envelope (workers/observe.py).
    shown = saferepr(Answer(envelope), task.resultrepr_maxsize)

    assert shown.startswith("OK (job 6f1c2a9e-4b7d-4c1e-9a53-2f0e8d7b1c44, ")
    assert shown.endswith("result: disks, volume_groups, partitions")
    assert len(shown) <= PREVIEW_MAX
    assert "logical_volumes" not in shown


class _CountingStack:
    """A task's request stack that counts how often the task asks for its request."""

    def __init__(self, stack: Any) -> None:
        self.stack = stack
        self.reads = 0

    @property
    def top(self) -> Any:
        self.reads += 1
        return self.stack.top

    def push(self, request: Any) -> None:
        self.stack.push(request)

    def pop(self) -> Any:
        return self.stack.pop()


def test_a_job_task_finds_its_request_once_and_answers_under_its_task_id() -> None:
    settings = Settings()
    app = create_app(settings, broker="memory://", backend="cache+memory://")
    task = app.tasks["apportion.partition"]
    publisher = MemoryPublisher()
    set_runtime(Runtime(settings=settings, publisher=publisher, failures=MemoryFailureStore()))
    counting = _CountingStack(task.request_stack)
    task.request_stack = counting
    task.push_request(id="task-1", args=[], kwargs={})
    try:
        counting.reads = 0
        answer = task.run({k: v for k, v in SMALL.items() if k != "job_id"})
        reads = counting.reads
    finally:
        task.pop_request()
        del task.request_stack
        set_runtime(None)

    # Celery finds a request on a thread-local stack, for a cost, at every task.request.
    assert reads == 1
    # A job without a job_id is answered under its task id, on the stream and as the
    # task's stored result (a backend the event's script cannot write: Celery's own).
    assert isinstance(answer, Answer)
    assert answer.envelope["job_id"] == "task-1"
    assert [e.job_id for e in publisher.envelopes()] == ["task-1"]
    stored = task.backend.get_result("task-1")
    assert stored == json.loads(publisher.events[0]["envelope"])
    # The task's return value (its log line, metrics, Flower's preview) keeps the
    # result's keys, not its content: the whole answer is stored already.
    assert answer.envelope == {**stored, "result": dict.fromkeys(stored["result"])}


def test_a_job_task_given_its_job_as_a_json_string_rejects_it_as_no_object() -> None:
    import json

    settings = Settings()
    app = create_app(settings, broker="memory://", backend="cache+memory://")
    task = app.tasks["apportion.partition"]
    set_runtime(
        Runtime(settings=settings, publisher=MemoryPublisher(), failures=MemoryFailureStore())
    )
    task.push_request(id="task-2", args=[], kwargs={})
    try:
        answer = task.run(json.dumps(SMALL))
    finally:
        task.pop_request()
        set_runtime(None)

    assert isinstance(answer, Answer)
    assert answer.envelope["status"] == "rejected"
    assert answer.envelope["error"]["code"] == "invalid_job"
    assert (
        answer.envelope["error"]["message"] == "$: a partition job must be a JSON object, got str"
    )


def test_a_job_task_runs_with_the_collector_paused_as_solve_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings()
    app = create_app(settings, broker="memory://", backend="cache+memory://")
    task = app.tasks["apportion.partition"]
    set_runtime(
        Runtime(settings=settings, publisher=MemoryPublisher(), failures=MemoryFailureStore())
    )
    seen: list[bool] = []

    def engine(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return run(*args, **kwargs)

    monkeypatch.setattr(jobs, "run", engine)
    task.push_request(id="task-2", args=[], kwargs={})
    try:
        answer = task.run(SMALL)
    finally:
        task.pop_request()
        set_runtime(None)

    assert answer.envelope["status"] == "ok"
    assert seen == [False]  # paused while the job ran
    assert gc.isenabled()  # and running again once it was answered
