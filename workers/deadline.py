"""A wall-clock bound on a command-line phase that talks to Redis.

Socket timeouts bound each wait, but a phase is many waits: redis-py retries a
connection, kombu retries connecting, Celery retries a send, each with its own count,
so a Redis that accepts connections and never answers (stopped, or behind a partition
that drops packets) held ``apportion submit --timeout 10`` for minutes. A command's
``--timeout`` is a promise to its caller; :func:`deadline` keeps it whatever the
libraries underneath do. For the main thread of a command-line process only (SIGALRM).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class DeadlineExceeded(BaseException):
    """The phase did not finish within its bound.

    A BaseException, like KeyboardInterrupt: the libraries it interrupts catch
    ``Exception`` to retry or to wrap it in their own connection errors.
    """

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no answer within {seconds:g} s")
        self.seconds = seconds


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`DeadlineExceeded` in the block once ``seconds`` have passed
    (a no-op outside the main thread, or where SIGALRM does not exist)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expired(signum: int, frame: Any) -> None:
        raise DeadlineExceeded(seconds)

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, max(0.01, seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


__all__ = ["DeadlineExceeded", "deadline"]
