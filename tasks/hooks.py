"""Task hooks: what a kind's task does with an answer after the engine gave it.

A kind lists hooks by name (``JobKind.hooks``); each is applied in order to the
envelope before it is published. Registering a task with an unknown hook fails when
the worker starts, not on the first job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from apportion.contracts import Envelope
from apportion.errors import StoreUnavailable
from apportion.workers.job_clock import waiting_on_redis
from apportion.workers.launch.launcher import launch_with_retries
from apportion.workers.runtime import Runtime, utcnow

log = logging.getLogger("apportion.tasks")

# (the engine's envelope, the job as sent, the runtime, re-run the engine on a job)
Rerun = Callable[[Any], Envelope]
Hook = Callable[[Envelope, Any, Runtime, Rerun], Envelope]


def launcher(envelope: Envelope, job: Any, rt: Runtime, rerun: Rerun) -> Envelope:
    """Launch on the chosen candidate; on failure record it and select again."""
    if rt.launcher is None or not isinstance(job, dict):
        return envelope
    return launch_with_retries(
        envelope,
        job,
        launcher=rt.launcher,
        history=rt.failures,
        attempts=rt.settings.launch_attempts,
        now=utcnow,
        reselect=rerun,
    )


def remember(envelope: Envelope, job: Any, rt: Runtime, rerun: Rerun) -> Envelope:
    """Keep an answered job for the policy studio to offer (workers/studio/recent.py)."""
    if rt.recent is not None and envelope.status == "ok":
        # Its time is Redis's, not the engine's (workers/job_clock.py); a record not
        # kept is only logged, so a soft limit landing in it does not fail the job.
        try:
            with waiting_on_redis("keeping the job for the studio"):
                rt.recent.remember(job)
        except StoreUnavailable as exc:
            log.warning("the recent launch_select jobs record was not updated: %s", exc)
    return envelope


HOOKS: dict[str, Hook] = {"launcher": launcher, "remember": remember}


def hooks_for(names: tuple[str, ...]) -> tuple[Hook, ...]:
    unknown = [name for name in names if name not in HOOKS]
    if unknown:
        raise ValueError(f"unknown task hook(s) {unknown}; hooks are {list(HOOKS)}")
    return tuple(HOOKS[name] for name in names)
