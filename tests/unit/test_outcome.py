"""launch_outcome's engine: what it answers before and after the store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from apportion.engine import Context, run
from apportion.limits import Limits

NOW = datetime(2026, 11, 21, 22, 0, tzinfo=UTC)


def event(at: datetime) -> dict[str, Any]:
    return {"event_id": "e1", "account": "a", "outcome": "failed", "at": at.isoformat()}


def test_an_event_dated_beyond_the_allowed_clock_skew_is_rejected_naming_the_limit() -> None:
    ctx = Context(now=NOW, limits=Limits(max_event_skew_seconds=300))

    env = run("launch_outcome", event(NOW + timedelta(hours=1)), ctx)

    assert env.status == "rejected"
    assert env.error is not None
    assert env.error.code == "in_the_future"
    assert env.error.details[0].path == "at"
    assert "APPORTION_LIMITS__MAX_EVENT_SKEW_SECONDS" in env.error.message


def test_a_little_clock_skew_is_accepted() -> None:
    ctx = Context(now=NOW, limits=Limits(max_event_skew_seconds=300))

    assert run("launch_outcome", event(NOW + timedelta(seconds=299)), ctx).status == "ok"


def test_the_answer_says_why_an_event_was_not_recorded() -> None:
    answers = iter([True, False, "outside_retention"])
    ctx = Context(now=NOW, record_outcome=lambda _event: next(answers))

    results = [run("launch_outcome", event(NOW), ctx).result for _ in range(3)]

    assert [(r["recorded"], r["skipped"]) for r in results if r] == [
        (True, None),
        (False, "already_recorded"),
        (False, "outside_retention"),
    ]


def test_an_event_id_the_history_holds_for_other_content_is_a_duplicate_job_id() -> None:
    ctx = Context(now=NOW, record_outcome=lambda _event: "duplicate_job_id")

    env = run("launch_outcome", event(NOW), ctx)

    assert env.status == "rejected"
    assert env.error is not None
    assert env.error.code == "duplicate_job_id"
    assert env.error.details[0].path == "event_id"
