"""The job tasks (``apportion.partition`` and friends).

Thin: solve (apportion.engine), then answer once (workers/results/answers.py: the same
envelope on the result stream and in the result backend). A message the gate rejected
(workers/broker/gate.py) carries the verdict in a header and is answered from it.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import partial
from typing import Any

from celery import Celery, Task
from celery.exceptions import Reject, SoftTimeLimitExceeded
from celery.signals import task_postrun, task_prerun

from apportion import kinds
from apportion.collector import collector_paused
from apportion.config.settings import Settings
from apportion.context import Progress
from apportion.contracts import Envelope, ErrorDetail, ErrorInfo
from apportion.contracts.base import valid_job_id
from apportion.engine import run
from apportion.errors import InfrastructureError, StoreUnavailable
from apportion.kinds import JobKind
from apportion.tasks.hooks import hooks_for
from apportion.workers.broker.gate import VERDICT_HEADER
from apportion.workers.job_clock import engine_seconds, job_ended, job_started, limit_is_the_engines
from apportion.workers.observe import PREVIEW_MAX, Answer
from apportion.workers.results import fast_json
from apportion.workers.results.answers import (
    bounded,
    fingerprint,
    hold_soft_limit,
    release_soft_limit,
    settle,
    settle_recorded,
)
from apportion.workers.results.celery_result import can_record, success_record
from apportion.workers.runtime import PoliciesRead, Runtime, get_runtime

log = logging.getLogger("apportion.tasks")


def _time_limit_envelope(
    kind: JobKind, job: Any, job_id: str, rt: Runtime, *, hard: bool = False
) -> Envelope:
    own = job.get(kind.id_field) if isinstance(job, dict) else None
    queue = kind.queue
    limits = rt.settings.time_limit(kind)
    seconds, which = (limits.hard, "HARD") if hard else (limits.soft, "SOFT")
    # A job that outgrows the time limit will do so again: it is the job's size, not a
    # passing fault, so it is answered (and never retried).
    return Envelope.rejected(
        own if valid_job_id(own) else job_id,
        kind.name,
        ErrorInfo(
            code="time_limit",
            message=f"the job ran longer than the {queue} queue's {which.lower()} time limit "
            f"of {seconds:g} s; make it smaller or raise APPORTION_TIME_LIMITS__"
            f"{queue.upper()}__{which}",
        ),
        elapsed_ms=seconds * 1000.0,
    )


def publish_or_retry(
    task: Task, rt: Runtime, envelope: Envelope, digest: str, request: Any
) -> dict[str, Any]:
    """Answer once (see workers/results/answers.py); on a Redis outage retry with backoff.

    Returns the envelope for the result backend: the one on the stream, stored there
    already (tasks are registered with ``ignore_result``: see
    workers/results/celery_result.py, which usually writes it with the event). The retry
    re-runs the job (engines are deterministic and cheap next to an outage);
    publishing is idempotent by job_id, so a retry after a publish that did land
    produces no second event. From the start of publishing until the task ends, a soft
    time limit no longer raises (answers.hold_soft_limit): the job is solved, so the
    limit firing now means Redis is slow, not that the job is too big; publishing runs
    on to its own timeouts (an outage is retried), and once the answer is out a
    SoftTimeLimitExceeded would only store a FAILURE over it. Holding only after
    publishing left a window, between the publication and the hold, for exactly that.
    The hold lasts through a retry too (task_postrun releases it whatever the outcome):
    a soft limit interrupting the sending of the retry message would lose the job.

    ``request``: the task's request (``task.request``, read once a job by the caller).
    """
    envelope, text = bounded(envelope, rt.settings.limits)
    settings = rt.settings
    record = None
    if can_record(task, same_redis=settings.backend == settings.redis_url, request=request):
        record = success_record(task, text, settings.result_expires, request=request)
    hold_soft_limit()
    try:
        answer, recorded = settle_recorded(
            rt.publisher, envelope, digest, text, dedup_ttl=settings.dedup_ttl, record=record
        )
    # SoftTimeLimitExceeded: where the hold cannot apply (outside a pool child's main
    # thread).
    except (InfrastructureError, SoftTimeLimitExceeded) as exc:
        raise _retry(task, rt, exc, f"publishing {envelope.job_id}") from exc
    stored = answer.as_dict()
    if not recorded:
        task.backend.mark_as_done(request.id, stored, request=request)
    return stored


def _retry(task: Task, rt: Runtime, exc: BaseException, doing: str) -> Exception:
    """Run the whole task again later, without ever losing the job.

    With exponential backoff while retries last (a new message with a countdown).
    Two cases would lose the job, so both requeue the original message instead
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


def _solve(
    task: Task, kind: JobKind, job: Any, rt: Runtime, task_id: str, digest: str | None = None
) -> Envelope:
    # The policy store is read once per job: a re-run (the launcher's next attempt) uses
    # the version the first run used, so the attempts and the envelope agree.
    policies_read: PoliciesRead = {}
    progress = _progress(kind, job, rt, task_id)

    def rerun(again: Any, job_id: str | None = None) -> Envelope:
        ctx = rt.context(policies_read, digest)
        return run(
            kind.name,
            again,
            ctx if progress is None else replace(ctx, progress=progress),
            job_id=job_id or task_id,
            reraise=(SoftTimeLimitExceeded,),
            decoded=True,  # a task's argument: a string in it is no job, not JSON text
        )

    envelope = rerun(job)
    for hook in hooks_for(kind.hooks):
        # A re-run answers under the first answer's job id (the job's, or the task id).
        envelope = hook(envelope, job, rt, partial(rerun, job_id=envelope.job_id))
    return envelope


def _progress(kind: JobKind, job: Any, rt: Runtime, task_id: str) -> Progress | None:
    """The engine's progress reports (heal_org's) as events under the job's answer key."""
    if rt.progress is None:
        return None
    own = job.get(kind.id_field) if isinstance(job, dict) else None
    job_id = own if valid_job_id(own) else task_id
    return rt.progress.reporter(kind.name, job_id, rt.settings.heal_progress_every)


def execute(task: Task, kind: JobKind, job: Any, request: Any) -> dict[str, Any]:
    """Solve ``job`` and answer it. ``request``: ``task.request``, read once a job by the
    caller (Celery finds a task's request on a thread-local stack at every read)."""
    rt = get_runtime()
    digest: str | None = None
    try:
        # The job's content digest: the result publisher keeps it with the job_id, and a
        # launch_outcome is recorded with it (the history and the answer decided
        # together). Inside the try: a soft limit landing in it is handled below.
        digest = fingerprint(job, finite=fast_json.take_finite(job))
        envelope = _solve(task, kind, job, rt, request.id, digest)
        # Solved: from here on a soft limit means Redis is slow (see publish_or_retry).
        hold_soft_limit()
    except SoftTimeLimitExceeded as exc:
        soft = rt.settings.time_limit(kind).soft
        if not limit_is_the_engines(soft):
            # The limit counted time the engine did not spend: a wait on Redis, a
            # stalled main process, a frozen child (workers/job_clock.py).
            outage = StoreUnavailable(
                f"the soft time limit ({soft:g} s) fired after {engine_seconds():.1f} s of "
                "engine time: the rest was spent waiting (Redis, a stall)"
            )
            raise _retry(task, rt, outage, "solving") from exc
        envelope = _time_limit_envelope(kind, job, request.id, rt)
    except InfrastructureError as exc:  # a store (failure history, policies) could not answer
        raise _retry(task, rt, exc, "solving") from exc
    hold_soft_limit()
    return publish_or_retry(
        task, rt, envelope, digest if digest is not None else fingerprint(job), request
    )


def answer_hard_time_limit(name: str, task_id: str, args: Any, kwargs: Any) -> dict[str, Any]:
    """The answer to a job whose pool child the hard time limit killed (called in the
    worker's main process by workers/broker/requests.py): the published one if the job
    got that far, else a ``time_limit`` rejection, published once."""
    kind = kinds.get(name.removeprefix("apportion."))
    rt = get_runtime()
    job = _the_job(args, kwargs)
    if job is NOT_ONE_JOB:
        job = None
    envelope = _time_limit_envelope(kind, job, task_id, rt, hard=True)
    envelope, text = bounded(envelope, rt.settings.limits)
    answer = settle(rt.publisher, envelope, fingerprint(job), text, dedup_ttl=rt.settings.dedup_ttl)
    return answer.as_dict()


NOT_ONE_JOB: Any = object()


def _the_job(args: Any, kwargs: Any) -> Any:
    """The one job a message carries, as ``args=[job]`` or ``kwargs={"job": job}``;
    NOT_ONE_JOB for anything else."""
    if isinstance(args, list | tuple) and len(args) == 1 and not kwargs:
        return args[0]
    if not args and isinstance(kwargs, dict) and set(kwargs) == {"job"}:
        return kwargs["job"]
    return NOT_ONE_JOB


def _gate_rejection(kind: JobKind, task: Task, verdict: Any) -> Envelope:
    """The envelope for a message the gate turned away (workers/broker/gate.py)."""
    job_id = verdict.get("job_id") if isinstance(verdict, dict) else None
    try:
        error = ErrorInfo(
            code=str(verdict["code"]),
            message=str(verdict["message"]),
            details=tuple(
                ErrorDetail(path=str(d["path"]), message=str(d["message"]))
                for d in verdict["details"]
            ),
        )
    except (TypeError, KeyError):
        error = ErrorInfo(code="invalid_message", message="the message was refused at the gate")
    return Envelope.rejected(job_id if valid_job_id(job_id) else task.request.id, kind.name, error)


def _bad_arguments(
    kind: JobKind, task: Task, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Envelope:
    """The answer to a message whose arguments are not the one job producers send
    (docs/contract.md, "Sending a job")."""
    return Envelope.rejected(
        task.request.id,
        kind.name,
        ErrorInfo(
            code="invalid_message",
            message=f"{kind.task_name} takes exactly one argument, the job object; "
            f"got {len(args)} positional and {len(kwargs)} keyword arguments",
            details=(ErrorDetail(path="args", message="send args=[job] and no kwargs"),),
        ),
    )


def _make(kind: JobKind) -> Any:
    def job_task(self: Task, *args: Any, **kwargs: Any) -> Answer:
        # The collector paused for the whole job, as `apportion solve` pauses it
        # (apportion/collector.py); the body's decoding is paused too (fast_json).
        with collector_paused():
            return _job(self, kind, args, kwargs)

    job_task.__name__ = kind.name
    job_task.__qualname__ = kind.name
    job_task.__doc__ = f"Run one {kind.name} job ({kind.summary}) and publish its result event."
    return job_task


def _job(self: Task, kind: JobKind, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Answer:
    """One job's answer (``job_task``'s body)."""
    request = self.request  # one look-up of Celery's request stack for the whole job
    verdict = getattr(request, VERDICT_HEADER, None)
    if verdict is not None:
        envelope = _gate_rejection(kind, self, verdict)
        hold_soft_limit()  # nothing left to solve: see publish_or_retry
        digest = fingerprint(["gate", verdict])
        return _answer(publish_or_retry(self, get_runtime(), envelope, digest, request))
    # Any arity is accepted so that a producer's mistake (two jobs in args, the
    # job as a keyword) is answered with a rejected result like any bad job,
    # instead of a TypeError that leaves no result event at all.
    # The envelope is returned as an Answer: stored as the envelope itself, shown
    # in Flower and Celery's log as a short preview (workers/observe.py).
    job = _the_job(args, kwargs)
    if job is not NOT_ONE_JOB:
        return _answer(execute(self, kind, job, request))
    envelope = _bad_arguments(kind, self, args, kwargs)
    hold_soft_limit()
    digest = fingerprint([args, kwargs])
    return _answer(publish_or_retry(self, get_runtime(), envelope, digest, request))


def _answer(stored: dict[str, Any]) -> Answer:
    """The task's return value, once the envelope is stored (publish_or_retry): what its
    readers use — the top level (log line, metrics) and the result's keys (the preview
    Celery logs and Flower shows; tasks are registered with ``ignore_result``).

    The result's content is left out so that a big answer is freed with the job, while
    the collector is still paused, instead of being walked by its next pass."""
    result = stored.get("result")
    if isinstance(result, dict) and result:
        return Answer({**stored, "result": dict.fromkeys(result)})
    return Answer(stored)


# A soft time limit held after publishing (answers.hold_soft_limit) ends with the task.
task_postrun.connect(release_soft_limit, weak=False)
# Whose time a soft limit counts, and no soft limit outside a job (workers/job_clock.py).
task_prerun.connect(job_started, weak=False)
task_postrun.connect(job_ended, weak=False)

# Celery's request, telling the transport when a job reached a pool child and when that
# child died (quarantine counting), and answering a hard time limit.
GATED_REQUEST = "apportion.workers.broker.requests:GatedRequest"


def register(app: Celery, settings: Settings) -> None:
    """Register one task per registered job kind on ``app``, with its time limits."""
    fast_json.install()  # job bodies decoded without kombu's per-object hook
    for kind in kinds.REGISTRY.values():
        hooks_for(kind.hooks)  # an unknown hook stops the worker here, not on a job
        limit = settings.time_limit(kind)
        # shared=False: tasks belong to this app only (the demo builds a second app).
        # resultrepr_maxsize: Celery reprs every return value for its "succeeded" log
        # line and the task-succeeded event (Flower's result text); an Answer's repr is
        # its preview, at most workers.observe.PREVIEW_MAX characters.
        # ignore_result: the task stores its answer itself, mostly with its event
        # (publish_or_retry); errors are still stored by Celery.
        app.task(
            name=kind.task_name,
            bind=True,
            typing=False,
            shared=False,
            resultrepr_maxsize=PREVIEW_MAX,
            ignore_result=True,
            store_errors_even_if_ignored=True,
            soft_time_limit=limit.soft,
            time_limit=limit.hard,
            Request=GATED_REQUEST,
            # What GatedRequest answers when the hard time limit killed the pool child.
            answer_hard_time_limit=staticmethod(answer_hard_time_limit),
        )(_make(kind))
