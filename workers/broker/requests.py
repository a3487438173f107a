"""Celery's request for apportion's tasks: what the main process learns about a job.

Set as the tasks' ``Request`` (tasks/jobs.py: Celery's documented ``Task.Request``).
Three things only the worker's main process sees:

* **the job reached a pool child** — Celery calls ``revoked()`` just before it sends a
  job to the pool; the transport's QoS is told, so that a message given back at
  shutdown keeps its delivery count only if it had been started (quarantine,
  workers/broker/transport.py);
* **the pool child died running it** (``WorkerLostError``: OOM, a segfault, a kill) —
  the QoS keeps the message's delivery count when Celery requeues it, so a job that
  kills every child it reaches is quarantined after ``APPORTION_QUARANTINE_AFTER``
  deliveries instead of going round for ever;
* **the hard time limit killed the child** — Celery would store FAILURE while the
  stream holds the job's answer, or nothing at all. Here the answer is the published
  envelope if the job got that far, else a ``time_limit`` rejection published once;
  it is stored as the task's result and the message acknowledged. A child that was
  stopped (SIGSTOP) when its hard limit came spent none of that time on the job, one
  waiting on Redis (or publishing a solved job) spent Redis's, and a limit that fires
  late fired when this process's loop came back from waiting on Redis: the job is
  requeued instead (workers/job_clock.py). If Redis cannot be
  reached for that, Celery's own handling applies.

``revoked()`` being called from Celery's ``execute_using_pool`` is an internal, and so
is ``Request._context``; tests/unit/service/test_kombu_canary.py fails with a clear
message if an upgrade changes either.
"""

from __future__ import annotations

import logging
from pathlib import Path
from time import time
from typing import Any

from billiard.einfo import ExceptionWithTraceback
from billiard.exceptions import TimeLimitExceeded, WorkerLostError
from celery.worker import state
from celery.worker.request import Request

from apportion.workers.job_clock import infrastructure_since

log = logging.getLogger("apportion.requests")


def _tell_qos(message: Any, what: str) -> None:
    qos = getattr(getattr(message, "channel", None), "qos", None)
    method = getattr(qos, what, None)  # only apportion's transport has these
    if method is not None:
        method(message.delivery_tag)


def _stopped(pid: int | None) -> bool:
    """Whether process ``pid`` is stopped (SIGSTOP, a debugger), from /proc (Linux)."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[-1].split()
    return bool(fields) and fields[0] in ("T", "t")


# Seconds past its time after which a hard limit is taken for one the main process's
# loop could not fire (it waited on Redis), rather than for the job's size: more than a
# loaded host delays a timer, less than any reply timeout that holds the loop.
LATE_HARD_LIMIT = 2.0


def _late_by(started: float | None, limit: float) -> float:
    """How long after ``limit`` seconds from ``started`` (the job's start as Celery's
    request keeps it, wall clock) it is now; infinite when the start never reached this
    process (its loop was held since before the child took the job)."""
    if not started:
        return float("inf")
    return time() - started - limit


def _not_the_jobs(pid: int | None, started: float | None, limit: float) -> str | None:
    """Why a hard limit that fired now is not the job's own, if it is not."""
    if _stopped(pid):
        return "while its pool child was stopped (SIGSTOP)"
    since = infrastructure_since(pid) if pid else None
    if since is not None:
        return f"while the job had been waiting on Redis for {time() - since:.1f} s"
    late = _late_by(started, limit)
    if late > LATE_HARD_LIMIT:
        return f"{late:.1f} s late, after the worker's loop waited on Redis"
    return None


class GatedRequest(Request):  # type: ignore[misc]
    def revoked(self) -> bool:
        _tell_qos(self.message, "handed_to_pool")
        revoked: bool = super().revoked()
        return revoked

    def on_failure(
        self, exc_info: Any, send_failed_event: bool = True, return_ok: bool = False
    ) -> Any:
        exc = exc_info.exception
        if isinstance(exc, ExceptionWithTraceback):
            exc = exc.exc
        if isinstance(exc, TimeLimitExceeded) and not state.should_terminate:
            # billiard reports a hard time limit here first, then calls on_timeout,
            # which answers the job (below): storing FAILURE here would contradict it.
            return None
        # Celery treats a child's SystemExit/KeyboardInterrupt as a lost worker too.
        if isinstance(exc, WorkerLostError | SystemExit | KeyboardInterrupt):
            _tell_qos(self.message, "child_died")
        return super().on_failure(exc_info, send_failed_event, return_ok)

    def on_timeout(self, soft: bool, timeout: float) -> None:
        if soft or state.should_terminate:
            super().on_timeout(soft, timeout)
            return
        why = _not_the_jobs(self.worker_pid, self.time_start, timeout)
        if why is not None:
            # A frozen child spent none of that time on the job; a child waiting on
            # Redis (or publishing a solved job) spends Redis's; a limit that fires late
            # fired when this process's loop came back from waiting on Redis (a stall, a
            # partition), which the child most likely waited on too
            # (workers/job_clock.py). The pool kills the child all the same, and the job
            # runs again, unanswered.
            log.warning(
                "Hard time limit (%ss) reached for %s[%s] %s; the job is requeued, not answered",
                timeout,
                self.name,
                self.id,
                why,
            )
            state.task_ready(self)
            self.reject(requeue=True)
            return
        try:
            # The task carries its own answer (tasks/jobs.py registers it so): the tasks
            # stand above the service, which imports none of them.
            answer = self.task.answer_hard_time_limit(self.name, self.id, self.args, self.kwargs)
        except Exception:
            log.exception("could not answer %s[%s] after its hard time limit", self.name, self.id)
            super().on_timeout(soft, timeout)
            return
        log.error(
            "Hard time limit (%ss) exceeded for %s[%s]: answered %s",
            timeout,
            self.name,
            self.id,
            (answer.get("error") or {}).get("code", answer.get("status")),
        )
        state.task_ready(self)
        self.task.backend.mark_as_done(self.id, answer, request=self._context)
        if self.task.acks_late:
            self.acknowledge()
        self.send_event("task-succeeded", result=repr(answer)[:100], runtime=timeout)


__all__ = ["GatedRequest"]
