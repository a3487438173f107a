"""The job tasks (``apportion.partition`` and friends)."""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery, Task
from celery.exceptions import SoftTimeLimitExceeded

from apportion import ENGINE_VERSION
from apportion.contracts import Envelope, ErrorInfo, Kind
from apportion.engine import available_kinds, run
from apportion.errors import InfrastructureError
from config.celeryconfig import TASK_QUEUES
from workers.launcher import launch_with_retries
from workers.runtime import Runtime, get_runtime, utcnow

log = logging.getLogger("apportion.tasks")


def task_name(kind: Kind) -> str:
    return f"apportion.{kind}"


def _time_limit_envelope(kind: Kind, job: Any, task: Task, rt: Runtime) -> Envelope:
    job_id = job.get("job_id") if isinstance(job, dict) else None
    queue = TASK_QUEUES[task_name(kind)]
    soft = rt.settings.time_limits.for_queue(queue).soft  # type: ignore[arg-type]
    # A job that outgrows the time limit will do so again: it is the job's size, not a
    # passing fault, so it is answered (and never retried).
    return Envelope(
        job_id=job_id if isinstance(job_id, str) else task.request.id,
        kind=kind,
        status="rejected",
        error=ErrorInfo(
            code="time_limit",
            message=f"the job ran longer than the {queue} queue's soft time limit of {soft:g} s; "
            "make it smaller or raise APPORTION_TIME_LIMITS__"
            f"{queue.upper()}__SOFT",
        ),
        engine_version=ENGINE_VERSION,
        elapsed_ms=soft * 1000.0,
    )


def publish_or_retry(task: Task, rt: Runtime, envelope: Envelope) -> None:
    """Publish the result event; on a Redis outage retry the task with backoff.

    The retry re-runs the job (engines are deterministic and cheap next to an outage);
    publishing is idempotent by job_id, so a retry after a publish that did land
    produces no second event.
    """
    try:
        rt.publisher.publish(envelope)
    except InfrastructureError as exc:
        raise _retry(task, rt, exc, f"publishing {envelope.job_id}") from exc


def _retry(task: Task, rt: Runtime, exc: Exception, doing: str) -> Exception:
    """Retry the whole task later with exponential backoff (Redis was unreachable)."""
    retries = task.request.retries
    countdown = min(2**retries, rt.settings.publish_backoff_max)
    log.warning("%s failed (%s); retry %d in %ss", doing, exc, retries + 1, countdown)
    retry: Exception = task.retry(
        exc=exc, countdown=countdown, max_retries=rt.settings.publish_retries
    )
    return retry


def _solve(task: Task, kind: Kind, job: Any, rt: Runtime) -> Envelope:
    envelope = run(
        kind, job, rt.context(), job_id=task.request.id, reraise=(SoftTimeLimitExceeded,)
    )
    if kind == "launch_select" and rt.launcher is not None and isinstance(job, dict):
        envelope = launch_with_retries(
            envelope,
            job,
            launcher=rt.launcher,
            history=rt.failures,
            attempts=rt.settings.launch_attempts,
            now=utcnow,
            reselect=lambda again: run(
                kind, again, rt.context(), job_id=envelope.job_id, reraise=(SoftTimeLimitExceeded,)
            ),
        )
    return envelope


def execute(task: Task, kind: Kind, job: Any) -> dict[str, Any]:
    rt = get_runtime()
    try:
        envelope = _solve(task, kind, job, rt)
    except SoftTimeLimitExceeded:
        envelope = _time_limit_envelope(kind, job, task, rt)
    except InfrastructureError as exc:  # the failure-history store was unreachable
        raise _retry(task, rt, exc, "solving") from exc
    if envelope.status != "ok":
        log.info(
            "job %s (%s) %s: %s",
            envelope.job_id,
            kind,
            envelope.status,
            envelope.error.message if envelope.error else "",
        )
    publish_or_retry(task, rt, envelope)
    return envelope.model_dump(mode="json")


def _make(kind: Kind) -> Any:
    def job_task(self: Task, job: Any) -> dict[str, Any]:
        return execute(self, kind, job)

    job_task.__name__ = kind
    job_task.__qualname__ = kind
    job_task.__doc__ = f"Run one {kind} job (SPEC.md §2) and publish its result event."
    return job_task


def register(app: Celery) -> None:
    """Register a task on ``app`` for every kind whose engine exists."""
    for kind in available_kinds():
        # shared=False: tasks belong to this app only (the demo builds a second app).
        app.task(name=task_name(kind), bind=True, typing=False, shared=False)(_make(kind))
