"""What a task needs besides the job, behind one injectable seam.

Tasks ask :func:`get_runtime` for their publisher, stores and engine context. The
real worker builds them from settings on first use (so importing tasks never
connects to Redis); the embedded demo and tests install their own with
:func:`set_runtime`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import redis

from apportion.config.settings import Settings, get_settings
from apportion.contracts.events import LaunchOutcomeJob
from apportion.engine import Context, StoredPolicy
from apportion.engine_settings import engine_context
from apportion.workers.history.failure_store import (
    DUPLICATE,
    OUTSIDE_RETENTION,
    FailureHistory,
    FailureStore,
)
from apportion.workers.job_clock import waiting_on_redis
from apportion.workers.launch.launcher import Launcher, make_launcher
from apportion.workers.policies.store import PolicyStore
from apportion.workers.redis.client import get_redis
from apportion.workers.redis.keys import Keys
from apportion.workers.results.progress import ProgressEvents
from apportion.workers.results.publisher import ResultPublisher, StreamPublisher
from apportion.workers.studio.recent import RecentJobs

# What the policy store answered for one job, by the job's pool (see Runtime.context).
PoliciesRead = dict[str | None, StoredPolicy | None]


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    publisher: ResultPublisher
    failures: FailureHistory
    keys: Keys = field(default_factory=Keys)
    launcher: Launcher | None = None
    # None: no policy store (the default policy file decides, as in `apportion solve`).
    policies: PolicyStore | None = None
    # The studio's record of recent launch_select jobs (None: not kept).
    recent: RecentJobs | None = None
    # Progress events of long jobs (heal_org); None: not published.
    progress: ProgressEvents | None = None

    def context(
        self, policies_read: PoliciesRead | None = None, digest: str | None = None
    ) -> Context:
        """The engine context for one job: the clock read once, the stores injected.

        ``policies_read``: what the policy store answered earlier for this same job, by
        pool (filled as it is read). A job the launcher re-runs after a failed launch
        passes the same dict to every run, so all its attempts use one policy version.
        ``digest``: the job's content digest (``answers.fingerprint``), with which a
        launch_outcome is recorded, so the history and the answer are decided together.
        """
        now = utcnow()
        history = self.failures
        store = self.policies
        read = {} if policies_read is None else policies_read

        def policy_lookup(pool: str | None) -> StoredPolicy | None:
            # Read for every job that needs it (one round trip, both the pool's and the
            # default's current version), so a saved version decides the next job on
            # every worker; StoreUnavailable fails the job for a retry (docs/operations.md).
            assert store is not None
            if pool not in read:
                with waiting_on_redis("reading the policy store"):
                    found = store.effective(pool)
                read[pool] = (
                    None if found is None else StoredPolicy(found.pool, found.version, found.policy)
                )
            return read[pool]

        def failure_counts(accounts: Sequence[str], window_hours: float) -> Mapping[str, int]:
            with waiting_on_redis("reading the failure history"):
                return history.counts(accounts, window_hours, now)

        def record_outcome(event: Any) -> bool | str:
            assert isinstance(event, LaunchOutcomeJob)
            with waiting_on_redis("recording a launch outcome"):
                done = history.record(event, now, digest)
            if done.duplicate:
                return DUPLICATE
            return OUTSIDE_RETENTION if done.outside_retention else done.recorded

        return engine_context(
            self.settings,
            now,
            policy_lookup=None if store is None else policy_lookup,
            failure_counts=failure_counts,
            record_outcome=record_outcome,
        )


def build_runtime(settings: Settings) -> Runtime:
    keys = Keys(settings.stream_prefix)
    client = get_redis(settings)
    publisher = StreamPublisher(
        client,
        keys,
        maxlen=settings.stream_maxlen,
        dedup_ttl=settings.dedup_ttl,
        max_age_seconds=settings.stream_max_age,
    )
    return Runtime(
        settings=settings,
        publisher=publisher,
        failures=failure_store(settings, client),
        keys=keys,
        launcher=make_launcher(settings),
        policies=policy_store(settings, client),
        recent=recent_jobs(settings, client) if settings.recent_jobs else None,
        progress=ProgressEvents(client, keys, maxlen=settings.stream_maxlen),
    )


def policy_store(settings: Settings, client: redis.Redis | None = None) -> PolicyStore:
    """The policy store of ``settings`` (its Redis, key prefix, bounds and limits)."""
    return PolicyStore(
        client if client is not None else get_redis(settings),
        Keys(settings.stream_prefix),
        max_versions=settings.policy_max_versions,
        max_bytes=settings.policy_max_bytes,
        limits=settings.limits,
    )


def failure_store(settings: Settings, client: redis.Redis | None = None) -> FailureStore:
    """The failure history of ``settings`` (its Redis, key prefix, retention, bounds)."""
    return FailureStore(
        client if client is not None else get_redis(settings),
        Keys(settings.stream_prefix),
        retention_seconds=int(settings.failure_retention_hours * 3600),
        stream_maxlen=settings.stream_maxlen,
        stream_max_age=settings.stream_max_age,
        max_per_account=settings.failure_history_max_per_account,
        dedup_ttl=settings.dedup_ttl,
    )


def recent_jobs(settings: Settings, client: redis.Redis | None = None) -> RecentJobs:
    """The record of recent launch_select jobs of ``settings`` (how many, how large, how long)."""
    return RecentJobs(
        client if client is not None else get_redis(settings),
        Keys(settings.stream_prefix),
        keep=settings.recent_jobs,
        max_bytes=settings.recent_job_max_bytes,
        ttl_seconds=settings.stream_max_age,
    )


_lock = threading.Lock()
_runtime: Runtime | None = None


def get_runtime() -> Runtime:
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = build_runtime(get_settings())
        return _runtime


def set_runtime(runtime: Runtime | None) -> None:
    """Install ``runtime`` for this process (``None`` → rebuild from settings on next use)."""
    global _runtime
    with _lock:
        _runtime = runtime
