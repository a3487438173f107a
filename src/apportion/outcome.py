"""launch_outcome: a launch attempt's outcome, recorded in the failure-history store.

The engine part is validation (the contract model) and the answer; the recording is
the store's, injected as ``Context.record_outcome`` by the worker, so this stays a pure
function of its inputs. Without a store (``apportion solve``) ``recorded`` is null.
"""

from __future__ import annotations

from apportion.contracts.events import LaunchOutcomeJob, LaunchOutcomeResult
from apportion.engine import Context


def solve(event: LaunchOutcomeJob, ctx: Context) -> LaunchOutcomeResult:
    recorded = ctx.record_outcome(event) if ctx.record_outcome is not None else None
    return LaunchOutcomeResult(
        event_id=event.event_id,
        account=event.account,
        outcome=event.outcome,
        at=event.at,
        job_id=event.job_id,
        recorded=recorded,
    )


__all__ = ["solve"]
