"""The examples and the demo's jobs answer the same on any date.

Each job is answered as a worker answers it — the engine with a failure history that
keeps `APPORTION_FAILURE_RETENTION_HOURS` — today and with the clock moved years
ahead. A job carrying a time that ages (a launch_outcome dated on a fixed day) would be
answered `recorded: false` once that day is older than the history keeps.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apportion.engine import Context, run
from apportion.engine_settings import load_default_policy
from apportion.workers.demo.runner import demo_jobs
from apportion.workers.history.failure_store import OUTSIDE_RETENTION, MemoryFailureStore
from tests.support.gen_docs import example_jobs, kind_of, without_timing

TODAY = datetime.now(UTC)
LATER = [TODAY + timedelta(days=8), TODAY + timedelta(days=3653), datetime(2100, 1, 1, tzinfo=UTC)]


def answered(kind: str, job: dict[str, Any], now: datetime, history: MemoryFailureStore) -> Any:
    """The envelope a worker whose clock says ``now`` answers (workers/runtime.py)."""

    def record_outcome(event: Any) -> bool | str:
        done = history.record(event, now)
        return OUTSIDE_RETENTION if done.outside_retention else done.recorded

    context = Context(
        now=now,
        default_policy=load_default_policy(None),
        failure_counts=lambda accounts, window: history.counts(accounts, window, now),
        record_outcome=record_outcome,
    )
    return run(kind, json.loads(json.dumps(job)), context).as_dict()


EXAMPLES = {
    name: (kind_of(name), json.loads(path.read_text())) for name, path in example_jobs().items()
}
DEMO = {job.get("event_id", job.get("job_id")): (kind, job) for kind, _, job in demo_jobs()}
JOBS = {
    **{f"examples/{n}": j for n, j in EXAMPLES.items()},
    **{f"demo/{n}": j for n, j in DEMO.items()},
}


@pytest.mark.parametrize("now", LATER, ids=lambda d: d.date().isoformat())
@pytest.mark.parametrize("name", sorted(JOBS))
def test_every_example_and_demo_job_answers_the_same_on_any_date(name: str, now: datetime) -> None:
    kind, job = JOBS[name]

    today = answered(kind, job, TODAY, MemoryFailureStore())
    later = answered(kind, job, now, MemoryFailureStore())

    assert the_clock_as_now(without_timing(later), now) == the_clock_as_now(
        without_timing(today), TODAY
    )


def the_clock_as_now(data: Any, now: datetime) -> Any:
    """``data`` with each time equal to the answering clock written ``<now>``: a job
    that leaves a time to the worker (an auto_attach's `at`) is answered at its clock."""
    if isinstance(data, dict):
        return {k: the_clock_as_now(v, now) for k, v in data.items()}
    if isinstance(data, list):
        return [the_clock_as_now(v, now) for v in data]
    if isinstance(data, str) and data[:4].isdigit() and "T" in data:
        try:
            if datetime.fromisoformat(data) == now:
                return "<now>"
        except ValueError:
            pass
    return data


@pytest.mark.parametrize("now", [TODAY, *LATER], ids=lambda d: d.date().isoformat())
@pytest.mark.parametrize(
    "name", sorted(n for n, (kind, _) in JOBS.items() if kind == "launch_outcome")
)
def test_the_launch_outcome_example_and_demo_event_are_recorded_once_on_any_date(
    name: str, now: datetime
) -> None:
    kind, job = JOBS[name]
    history = MemoryFailureStore()

    first = answered(kind, job, now, history)
    again = answered(kind, job, now, history)

    assert first["status"] == "ok"
    assert (first["result"]["recorded"], first["result"]["skipped"]) == (True, None)
    assert (again["result"]["recorded"], again["result"]["skipped"]) == (False, "already_recorded")
    assert [e["event_id"] for e in history.stream] == [job["event_id"]]
    # It happened when it was answered: the worker's clock.
    assert datetime.fromisoformat(first["result"]["at"]) == now


def test_there_are_launch_outcomes_among_the_examples_and_the_demo() -> None:
    kinds = [kind for kind, _ in JOBS.values()]

    assert kinds.count("launch_outcome") >= 2
