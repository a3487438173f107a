"""launch_outcome: a launch attempt's outcome, recorded in the failure-history store.

The engine part is validation (the contract model) and the answer; the recording is
the store's, injected as ``Context.record_outcome`` by the worker, so this stays a pure
function of its inputs. Without a store (``apportion solve``) ``recorded`` is null.
"""

from __future__ import annotations

from datetime import UTC

from apportion.context import Context
from apportion.contracts.events import LaunchOutcomeJob, LaunchOutcomeResult
from apportion.errors import Rejected
from apportion.limits import env_name

# ctx.record_outcome's answer for an event_id recorded for other content.
DUPLICATE_JOB_ID = "duplicate_job_id"


def solve(event: LaunchOutcomeJob, ctx: Context) -> LaunchOutcomeResult:
    if event.at is None:
        # Reported as it happens: it happened at the clock the job runs with.
        event = event.model_copy(update={"at": ctx.now})
    _not_in_the_future(event, ctx)
    answer = ctx.record_outcome(event) if ctx.record_outcome is not None else None
    if answer == DUPLICATE_JOB_ID:
        # The history holds this event_id for a send of other content, whose answer it
        # is; this send is the one refused (and the worker publishes no event for it).
        raise Rejected.at(
            "event_id",
            f"{event.event_id!r} was already recorded for an event with different "
            "content; give each event its own event_id",
            code=DUPLICATE_JOB_ID,
        )
    recorded: bool | None = answer if not isinstance(answer, str) else False
    skipped: str | None = answer if isinstance(answer, str) else None
    if answer is False:
        skipped = "already_recorded"
    return LaunchOutcomeResult(
        event_id=event.event_id,
        account=event.account,
        outcome=event.outcome,
        at=event.at or ctx.now,
        job_id=event.job_id,
        recorded=recorded,
        skipped=skipped,
    )


def _not_in_the_future(event: LaunchOutcomeJob, ctx: Context) -> None:
    """An event dated ahead of the clock (beyond the allowed skew) would count in every
    failure window until that date: refused."""
    when = event.at or ctx.now
    at = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    ahead = (at - ctx.now).total_seconds()
    limit = ctx.limits.max_event_skew_seconds
    if ahead > limit:
        raise Rejected.at(
            "at",
            f"{when.isoformat()} is {ahead:.0f} s ahead of the worker's clock; at most "
            f"{limit} s is allowed (raise {env_name('max_event_skew_seconds')})",
            code="in_the_future",
        )


__all__ = ["solve"]
