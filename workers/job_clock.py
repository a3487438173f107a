"""Whose time a soft time limit counts: the engine's, never Redis's.

A time limit answers ``time_limit`` only for time the engine itself spent. Celery's
timers run in the worker's main process; when that process waits on Redis (a stall, a
partition), they fire late, the moment it resumes, while the pool child may still be
waiting for Redis's reply too; a child frozen (SIGSTOP) gets its limit on waking. Each
of those would answer a valid job ``time_limit``, for good. So, in the pool child:

* the engine's calls to Redis (the policy store, the failure history) run inside
  :func:`waiting_on_redis`: their time is counted apart, and a soft limit that lands
  inside one becomes :class:`~apportion.errors.StoreUnavailable`, which the task
  retries like any outage (tasks/jobs.py);
* a soft limit that lands in the engine is the job's only when the engine's own time
  (the task's time minus its Redis waits) has reached the limit, less
  :data:`TOLERANCE`, and the child was not stopped and continued (SIGCONT) meanwhile
  (:func:`limit_is_the_engines`); otherwise the task retries the job;
* a soft limit signal that arrives when the child runs no job (the job ended while the
  main process was blocked) is logged and ignored, instead of raising in the pool's
  own loop and killing the child.

* the soft limit is enforced in the child too: Celery sends it from the main process's
  event loop, which a partition can hold for as long as Redis is away (each of its
  commands waits out a socket timeout); the child arms its own timer when a job starts
  and, if the main process's signal has not come :data:`GRACE` seconds after the soft
  limit, raises it itself (:func:`job_started`), decided by the same rule. A job gets
  one soft limit: whichever of the two signals comes second is ignored.

Time waiting on Redis is bounded by the clients' reply timeout (Settings.reply_timeout:
at most half the shortest soft limit). The hard limit stays the main process's backstop:
it kills the child whatever it was doing; one that finds the child stopped, on Redis
time (:func:`infrastructure_since`: waiting on Redis, publishing a solved job, or on its
way to a retry), or that fires late because the main process's loop was held (a
partition), requeues the job instead of answering it (workers/broker/requests.py).
"""

from __future__ import annotations

import logging
import mmap
import os
import signal
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from time import monotonic, time
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from apportion.errors import StoreUnavailable

log = logging.getLogger("apportion.tasks")

# How much of the soft limit may go to what is neither the engine nor a counted Redis
# wait (Celery's own bookkeeping before and after the task, decoding the job, the
# timer's tick) without the limit ceasing to be the engine's.
TOLERANCE = 0.5

# How long after the soft limit the child waits for the main process's signal before it
# raises the limit itself: the main process normally signals on time, and a second
# signal for the same job is ignored, so this only decides who speaks first.
GRACE = 1.0


# Where each pool child says since when it has been on infrastructure time (waiting on
# Redis, or publishing once the engine is done), for the main process to read when a
# hard limit fires: killing a child there is an outage's doing, and the job is requeued
# (workers/broker/requests.py). An anonymous shared mapping made at import, so before
# the pool forks: a slot per pid modulo SLOTS holds (pid, wall-clock since; 0: engine).
SLOTS = 4096
_SLOT = struct.Struct("dd")
_SHARED = mmap.mmap(-1, SLOTS * _SLOT.size)


def _mark(since: float) -> None:
    pid = os.getpid()
    _SLOT.pack_into(_SHARED, (pid % SLOTS) * _SLOT.size, float(pid), since)


def infrastructure_since(pid: int) -> float | None:
    """Since when (wall clock) pool child ``pid``'s job has been waiting on Redis or
    publishing; None while it runs the engine (or when nothing is known of it)."""
    owner, since = _SLOT.unpack_from(_SHARED, (pid % SLOTS) * _SLOT.size)
    return since if int(owner) == pid and since > 0 else None


class _Clock:
    __slots__ = (
        "continued",
        "depth",
        "done",
        "gated",
        "pid",
        "running",
        "signalled",
        "started",
        "waited",
    )

    def __init__(self) -> None:
        self.running = False
        self.signalled = False  # this job's soft limit has been raised
        self.gated = False  # a pool child: billiard's soft-limit handler is behind our gate
        self.done = False  # the engine has finished: the rest of the job is publishing
        self.started = 0.0
        self.waited = 0.0
        self.depth = 0
        self.continued = False
        self.pid = 0  # the process the signal handlers were installed in


_CLOCK = _Clock()


def job_started(task: Any = None, **_: Any) -> None:
    """``task_prerun``: a job starts in this process; in a pool child, its own timer for
    the task's soft limit is armed."""
    clock = _CLOCK
    if clock.pid != os.getpid() and threading.current_thread() is threading.main_thread():
        _install(clock)
    clock.running = True
    clock.signalled = False
    clock.started = monotonic()
    clock.waited = 0.0
    clock.depth = 0
    clock.continued = False
    clock.done = False
    _mark(0.0)
    soft = soft_limit_of(task)
    if clock.gated and soft:
        signal.setitimer(signal.ITIMER_REAL, soft + GRACE)


def job_ended(**_: Any) -> None:
    """``task_postrun``: the job ended (answered, retried or failed)."""
    _CLOCK.running = False
    _mark(0.0)
    if _CLOCK.gated:
        signal.setitimer(signal.ITIMER_REAL, 0)


def engine_done() -> None:
    """The engine has answered: from here to the task's end, the job only publishes, and
    a hard limit landing there is Redis's doing."""
    if _CLOCK.running and not _CLOCK.done:
        _CLOCK.done = True
        _mark(time())


def soft_limit_of(task: Any) -> float | None:
    """The soft limit a task runs under: its message's (``timelimit`` header), else the
    task's own."""
    limits = getattr(getattr(task, "request", None), "timelimit", None) or (None, None)
    soft = limits[1] if len(limits) > 1 else None
    return soft or getattr(task, "soft_time_limit", None)


@contextmanager
def waiting_on_redis(what: str) -> Iterator[None]:
    """Around an engine's call to Redis: its time is not the engine's, and a soft time
    limit landing in it is an outage (retried), not the job's size."""
    clock = _CLOCK
    clock.depth += 1
    began = monotonic()
    if clock.depth == 1 and not clock.done:
        _mark(time())
    answered = False
    try:
        yield
        answered = True
    except SoftTimeLimitExceeded as exc:
        raise StoreUnavailable(
            f"{what}: Redis had not answered when the soft time limit fired"
        ) from exc
    finally:
        clock.depth -= 1
        clock.waited += monotonic() - began
        if clock.depth == 0 and not clock.done:
            if answered:
                _mark(0.0)
            else:
                # The job now goes to its retry or requeue, which is Redis's time too
                # (sending the retry waits on the same Redis that just failed).
                clock.done = True


def engine_seconds() -> float:
    """The running job's time so far, less its waits on Redis."""
    clock = _CLOCK
    return monotonic() - clock.started - clock.waited


def limit_is_the_engines(soft: float) -> bool:
    """Whether a soft time limit of ``soft`` seconds that just fired counts the engine's
    own time (answer ``time_limit``), not a stall or a freeze (retry the job)."""
    clock = _CLOCK
    if not clock.running:
        return True  # not in a worker's job (a test calling the task directly)
    if not clock.continued and engine_seconds() >= soft - TOLERANCE:
        return True
    engine_done()  # the job is retried from here: Redis's time, like any wait on it
    return False


class _SoftLimitGate:
    """SIGUSR1's handler in a pool child, in front of the pool's (billiard's, which
    raises SoftTimeLimitExceeded): only while a job runs."""

    __slots__ = ("pool",)

    def __init__(self, pool: Any) -> None:
        self.pool = pool

    def __call__(self, signum: int, frame: Any) -> None:
        if not _CLOCK.running:
            log.warning("a soft time limit arrived after its job had ended; ignored")
            return
        if _CLOCK.signalled:
            return  # the child's own timer and the main process's signal: one limit a job
        _CLOCK.signalled = True
        self.pool(signum, frame)


def _own_soft_limit(signum: int, frame: Any) -> None:
    """SIGALRM in a pool child: the soft limit's time has come (and gone by GRACE) with
    no signal from the main process, whose loop waits on Redis; raise it here, through
    the same handlers (and holds) as the main process's signal."""
    if not _CLOCK.running or _CLOCK.signalled:
        return
    log.warning(
        "the worker's main process did not signal the soft time limit (its loop waits on "
        "Redis); the pool child raises it itself"
    )
    handler = signal.getsignal(signal.SIGUSR1)
    if callable(handler):
        handler(signal.SIGUSR1, frame)


def _on_continued(signum: int, frame: Any) -> None:
    if _CLOCK.running:
        _CLOCK.continued = True


def _install(clock: _Clock) -> None:
    clock.pid = os.getpid()
    current = signal.getsignal(signal.SIGUSR1)
    if callable(current) and not isinstance(current, _SoftLimitGate):
        signal.signal(signal.SIGUSR1, _SoftLimitGate(current))
        clock.gated = True
        signal.signal(signal.SIGALRM, _own_soft_limit)
    if signal.getsignal(signal.SIGCONT) in (signal.SIG_DFL, None):
        # The process continues whatever the handler; this only notes that it had stopped.
        signal.signal(signal.SIGCONT, _on_continued)


__all__ = [
    "GRACE",
    "TOLERANCE",
    "engine_done",
    "engine_seconds",
    "infrastructure_since",
    "job_ended",
    "job_started",
    "limit_is_the_engines",
    "soft_limit_of",
    "waiting_on_redis",
]
