"""The job tasks (``apportion.partition`` and friends)."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from celery import Celery, Task
from celery.exceptions import Reject, SoftTimeLimitExceeded

from apportion import ENGINE_VERSION, kinds
from apportion.config.settings import Settings
from apportion.contracts import Envelope, ErrorDetail, ErrorInfo
from apportion.engine import run
from apportion.errors import InfrastructureError
from apportion.kinds import JobKind
from apportion.tasks.hooks import hooks_for
from apportion.workers.runtime import Runtime, get_runtime

log = logging.getLogger("apportion.tasks")


def _time_limit_envelope(kind: JobKind, job: Any, task: Task, rt: Runtime) -> Envelope:
    job_id = job.get(kind.id_field) if isinstance(job, dict) else None
    queue = kind.queue
    soft = rt.settings.time_limit(queue).soft
    # A job that outgrows the time limit will do so again: it is the job's size, not a
    # passing fault, so it is answered (and never retried).
    return Envelope(
        job_id=job_id if isinstance(job_id, str) else task.request.id,
        kind=kind.name,
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
    produces no second event. A soft time limit that fires while publishing means
    Redis is slow, not that the job is too big (the job is already solved): it is
    retried like an outage rather than failing the task, which would lose the job.
    """
    try:
        rt.publisher.publish(envelope)
    except (InfrastructureError, SoftTimeLimitExceeded) as exc:
        raise _retry(task, rt, exc, f"publishing {envelope.job_id}") from exc


def _retry(task: Task, rt: Runtime, exc: BaseException, doing: str) -> Exception:
    """Run the whole task again later, without ever losing the job.

    With exponential backoff while retries last (a new message with a countdown).
    Two ways the job used to be lost, both now a requeue of the original message
    (acks_late keeps it unacknowledged until then):

    * the retry message itself cannot be sent — the broker is the same Redis that
      just failed — which Celery answers with ``Reject(requeue=False)``, a drop;
    * the retries are used up while Redis is still away: failing the task would ack
      the message with no result published anywhere.

    A requeued job runs again as soon as a worker takes it; every attempt first waits
    out the Redis client's own reconnect backoff, so this is a slow loop, never a hot
    one, and it ends when Redis answers again.
    """
    retries = task.request.retries
    if retries >= rt.settings.publish_retries:
        log.error(
            "%s failed (%s) after %d retries; the job goes back on its queue",
            doing,
            exc,
            retries,
        )
        return _requeue(f"{doing}: {exc}")
    countdown = min(2**retries, rt.settings.publish_backoff_max)
    log.warning("%s failed (%s); retry %d in %ss", doing, exc, retries + 1, countdown)
    try:
        retry: Exception = task.retry(
            exc=exc, countdown=countdown, max_retries=rt.settings.publish_retries, throw=False
        )
    except Reject as unsent:
        log.error("%s: the retry could not be sent (%s); requeued instead", doing, unsent.reason)
        return _requeue(f"{doing}: {exc}")
    return retry


def _requeue(reason: str) -> Exception:
    """Celery's way to put the message back on its queue (acks_late: it was never acked)."""
    requeue: Exception = Reject(reason, requeue=True)
    return requeue


def _solve(task: Task, kind: JobKind, job: Any, rt: Runtime) -> Envelope:
    def rerun(again: Any, job_id: str | None = None) -> Envelope:
        return run(
            kind.name,
            again,
            rt.context(),
            job_id=job_id or task.request.id,
            reraise=(SoftTimeLimitExceeded,),
        )

    envelope = rerun(job)
    for hook in hooks_for(kind.hooks):
        # A re-run answers under the first answer's job id (the job's, or the task id).
        envelope = hook(envelope, job, rt, partial(rerun, job_id=envelope.job_id))
    return envelope


def execute(task: Task, kind: JobKind, job: Any) -> dict[str, Any]:
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
            kind.name,
            envelope.status,
            envelope.error.message if envelope.error else "",
        )
    publish_or_retry(task, rt, envelope)
    return envelope.as_dict()


def _bad_arguments(
    kind: JobKind, task: Task, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Envelope:
    """The answer to a message whose arguments are not the one job SPEC.md §3 sends."""
    return Envelope(
        job_id=task.request.id,
        kind=kind.name,
        status="rejected",
        error=ErrorInfo(
            code="invalid_message",
            message=f"{kind.task_name} takes exactly one argument, the job object; "
            f"got {len(args)} positional and {len(kwargs)} keyword arguments",
            details=(ErrorDetail(path="args", message="send args=[job] and no kwargs"),),
        ),
        engine_version=ENGINE_VERSION,
        elapsed_ms=0.0,
    )


def _make(kind: JobKind) -> Any:
    def job_task(self: Task, *args: Any, **kwargs: Any) -> dict[str, Any]:
        # Any arity is accepted so that a producer's mistake (two jobs in args, the
        # job as a keyword) is answered with a rejected result like any bad job,
        # instead of a TypeError that leaves no result event at all.
        if len(args) == 1 and not kwargs:
            return execute(self, kind, args[0])
        if not args and set(kwargs) == {"job"}:
            return execute(self, kind, kwargs["job"])
        envelope = _bad_arguments(kind, self, args, kwargs)
        log.info("job %s (%s) rejected: %s", envelope.job_id, kind.name, envelope.error)
        publish_or_retry(self, get_runtime(), envelope)
        return envelope.as_dict()

    job_task.__name__ = kind.name
    job_task.__qualname__ = kind.name
    job_task.__doc__ = f"Run one {kind.name} job ({kind.summary}) and publish its result event."
    return job_task


def register(app: Celery, settings: Settings) -> None:
    """Register one task per registered job kind on ``app``, with its queue's limits."""
    for kind in kinds.REGISTRY.values():
        hooks_for(kind.hooks)  # an unknown hook stops the worker here, not on a job
        limit = settings.time_limit(kind.queue)
        # shared=False: tasks belong to this app only (the demo builds a second app).
        # resultrepr_maxsize: Celery reprs every return value for its "succeeded" log
        # line and the task-succeeded event, walking it token by token up to the limit;
        # the envelope's first fields (job_id, kind, status) fit in 100 characters.
        app.task(
            name=kind.task_name,
            bind=True,
            typing=False,
            shared=False,
            resultrepr_maxsize=100,
            soft_time_limit=limit.soft,
            time_limit=limit.hard,
        )(_make(kind))
