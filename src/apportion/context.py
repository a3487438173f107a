"""What an engine may know besides its job: the :class:`Context` every solver is given.

It lives below the engines and below :mod:`apportion.engine`, which dispatches to them, so
an engine imports its context without importing its dispatcher. ``apportion.engine``
hands the same names on, as the public API of ``run(kind, payload, ctx)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from apportion.limits import DEFAULT_LIMITS, Limits

# (accounts, window_hours) -> {account: failures in the window}
FailureCounts = Callable[[Sequence[str], float], Mapping[str, int]]
# (event) -> True when the event was recorded now, False when its event_id was known, or
# a string naming why it was not recorded (e.g. "outside_retention")
RecordOutcome = Callable[[Any], bool | str]
UnknownFields = Literal["warn", "reject"]
# (consumers_done, consumers_total): called by heal_org after each consumer.
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class StoredPolicy:
    """A version of a pool's policy from the policy store (apportion.workers.policies)."""

    pool: str  # the pool it is the policy of; "default" for the global default
    version: int
    modules: Sequence[Mapping[str, Any]]


# (the job's pool, or None) -> the pool's current policy, else the default's; None when
# the store has neither. Raises an InfrastructureError when the store cannot answer.
PolicyLookup = Callable[[str | None], StoredPolicy | None]


@dataclass(frozen=True, slots=True)
class Context:
    """What an engine may know besides the job: limits, the clock, configured defaults.

    Passing these in (rather than reading a clock or settings inside an engine) keeps
    every engine a pure function of its inputs.
    """

    limits: Limits = DEFAULT_LIMITS
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    # launch_select: the policy a job without a `policy` key gets when there is no policy
    # store, or the store has no default (config/default_policy.yaml).
    default_policy: Sequence[Mapping[str, Any]] | None = None
    # launch_select: the policy store, asked once for a job without a `policy` key.
    # Injected by the worker (one Redis round trip); None: no store (`apportion solve`).
    policy_lookup: PolicyLookup | None = None
    # launch_select: whether a job's own `policy` list is used (APPORTION_ALLOW_INLINE_POLICY);
    # when not, such a job is rejected, so that only the store's policies decide.
    allow_inline_policy: bool = True
    # launch_select: failures per account within the last `window_hours`, for jobs that
    # leave `failures` null. Injected by the worker (the Redis failure-history store) so
    # the engine itself stays free of I/O; None means no history is available.
    failure_counts: FailureCounts | None = None
    # launch_outcome: records one event in the failure-history store, returning whether
    # the history holds it (False for an event_id recorded before by another sender),
    # "outside_retention", or "duplicate_job_id" for an event_id recorded for other
    # content. Injected by the worker, like the above.
    record_outcome: RecordOutcome | None = None
    # Unknown fields in a job that does not say `strict` itself: warned about ("warn") or
    # the job rejected ("reject", APPORTION_UNKNOWN_FIELDS). A job's own `strict`, true or
    # false, wins: the setting is the fleet's default, not a rule over every producer.
    unknown_fields: UnknownFields = "warn"
    # heal_org: told how many consumers are done after each one. Injected by the worker,
    # which publishes a progress event every so many (APPORTION_HEAL_PROGRESS_EVERY); the
    # engine only reports, so it stays free of I/O. None: nobody listens (`apportion solve`).
    progress: Progress | None = None


__all__ = [
    "Context",
    "FailureCounts",
    "PolicyLookup",
    "Progress",
    "RecordOutcome",
    "StoredPolicy",
]
