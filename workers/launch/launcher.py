"""The launcher hook: try the chosen candidate, and on failure feed the history and retry.

``launcher = none`` (the default) answers with the selection only. With a launcher the
launch_select task attempts the launch on the chosen candidate; a failure is recorded
as a launch-failure event (launch-failures stream + history store, once per event id)
and selection runs again without that account, up to ``launch_attempts`` times. Every
attempt is reported in the result.

Event ids are derived from the job id and the attempt number, and the simulated
launcher's dice from the same, so a redelivered job replays the same attempts and
records nothing twice.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from apportion.config.settings import Settings
from apportion.contracts import Envelope, ErrorDetail
from apportion.contracts.events import LaunchOutcomeJob
from apportion.workers.history.failure_store import FailureHistory
from apportion.workers.job_clock import waiting_on_redis


@dataclass(frozen=True, slots=True)
class LaunchOutcome:
    ok: bool
    reason: str | None = None


class Launcher(Protocol):
    def launch(
        self, job_id: str, attempt: int, account: str, request: Mapping[str, Any]
    ) -> LaunchOutcome: ...


@dataclass(frozen=True)
class SimulatedLauncher:
    """Each account fails with its configured rate; deterministic per (job, attempt)."""

    failure_rates: Mapping[str, float] = field(default_factory=dict)

    def launch(
        self, job_id: str, attempt: int, account: str, request: Mapping[str, Any]
    ) -> LaunchOutcome:
        rate = self.failure_rates.get(account, 0.0)
        if random.Random(f"{job_id}/{attempt}/{account}").random() < rate:
            return LaunchOutcome(False, f"simulated launch failure ({rate:.0%} rate)")
        return LaunchOutcome(True)


# APPORTION_LAUNCHER names one of these; each builds its launcher from the settings.
LAUNCHERS: dict[str, Callable[[Settings], Launcher | None]] = {
    # Selection only: the job's producer launches on the chosen candidate itself.
    "none": lambda settings: None,
    # Demo and benchmarks: each account fails with its rate from simulated_failure_rates.
    "simulated": lambda settings: SimulatedLauncher(dict(settings.simulated_failure_rates)),
}


def make_launcher(settings: Settings) -> Launcher | None:
    try:
        build = LAUNCHERS[settings.launcher]
    except KeyError:
        raise ValueError(
            f"APPORTION_LAUNCHER={settings.launcher!r} is not a launcher; "
            f"choose one of: {', '.join(LAUNCHERS)}"
        ) from None
    return build(settings)


def launch_with_retries(
    envelope: Envelope,
    job: Mapping[str, Any],
    *,
    launcher: Launcher,
    history: FailureHistory,
    attempts: int,
    now: Callable[[], datetime],
    reselect: Callable[[Mapping[str, Any]], Envelope],
) -> Envelope:
    """Launch on the selection; on failure record it, exclude the account, reselect."""
    job_id = envelope.job_id or "job"
    tried: list[dict[str, Any]] = []
    excluded = list(job.get("exclude_accounts") or [])
    current = envelope
    for attempt in range(1, attempts + 1):
        result = current.result
        if current.status != "ok" or result is None or result.get("selection") is None:
            break
        selection = result["selection"]
        account = selection["account"]
        request = result["allocation_requests"][selection["chosen"]]
        outcome = launcher.launch(job_id, attempt, account, request)
        event = LaunchOutcomeJob(
            event_id=f"{job_id}/launch-{attempt}",
            account=account,
            outcome="succeeded" if outcome.ok else "failed",
            at=now(),
            job_id=job_id,
            reason=outcome.reason,
        )
        # The history's time is Redis's, not the engine's: a soft limit landing in it is
        # an outage, retried (workers/job_clock.py).
        with waiting_on_redis("recording a launch attempt"):
            history.record(event, now())
        tried.append(_attempt(attempt, result, outcome))
        if outcome.ok or attempt == attempts:
            break
        excluded.append(account)
        current = reselect({**job, "exclude_accounts": excluded})
    return _with_attempts(current, tried)


def _attempt(attempt: int, result: Mapping[str, Any], outcome: LaunchOutcome) -> dict[str, Any]:
    """One launch attempt as the envelope's ``attempts`` lists it."""
    selection = result["selection"]
    return {
        "attempt": attempt,
        "account": selection["account"],
        "chosen": selection["chosen"],
        "roll": selection["roll"],
        # What the dice saw: the most preferred group's probabilities.
        "probabilities": selection["groups"][0]["probabilities"],
        "failures": result.get("extra", {}).get("failures"),
        "ok": outcome.ok,
        "reason": outcome.reason,
    }


def _with_attempts(current: Envelope, tried: list[dict[str, Any]]) -> Envelope:
    """The last selection's envelope with the attempts made, or its error naming them."""
    launched = bool(tried) and tried[-1]["ok"]
    if current.status == "ok" and current.result is not None:
        return replace(current, result={**current.result, "attempts": tried, "launched": launched})
    if current.error is None:
        return current
    # Every remaining account was excluded after failures: say which attempts failed.
    details = [
        *current.error.details,
        *(
            ErrorDetail(path=f"attempts[{i}]", message=f"{t['account']}: {t['reason']}")
            for i, t in enumerate(tried)
        ),
    ]
    return replace(current, error=replace(current.error, details=tuple(details)))
