"""Celery's prefork pool, with its watch on the pool children's exits made safe against
a reused file descriptor (the ``worker_pool`` setting, config/celeryconfig.py).

The pool watches each child through a copy of its exit sentinel (a pipe that becomes
readable when the child exits) registered with the worker's event loop, and forgets the
copy (``None``) once it saw the child exit. Two children dying together (a hard time
limit, or the OOM killer, as Redis went away under running jobs) end that watch wrongly:

1. Both sentinels are readable in the same turn of the event loop. The first child's
   handler reaps both and starts their replacements, and a replacement's sentinel copy
   takes the number of the second child's, just closed. The loop then hands the second
   child's readiness, read before, to the handler now registered under that number: the
   *new, live* child's, which forgets its sentinel.
2. When the worker next reconnects to Redis, Celery's consumer registers the pool with
   the event loop again, and the pool hands every child's sentinel to the loop, ``None``
   included: kombu refuses a ``None`` file descriptor with ``ValueError`` ("file
   descriptor is None"), which Celery only logs for ``OSError`` or ``AttributeError``,
   and the worker exits (``Unrecoverable error``).

Fix: an exit is believed only when the sentinel registered for that child is readable
now (a live child's never is); and when the pool registers again, a child still in the
pool whose sentinel was forgotten (by such an exit, or because it had exited but could
not be reaped yet) is watched again through a fresh copy, so that its exit, past or to
come, reaps it.

The members of Celery's pool used here are not documented API: each is named in
tests/unit/service/test_kombu_canary.py.
"""

from __future__ import annotations

import select
from typing import Any

from celery.concurrency import asynpool, prefork


def _readable(fd: int) -> bool:
    """Whether ``fd`` is readable now, or closed (POLLNVAL): then Celery finds out."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


class AsynPool(asynpool.AsynPool):  # type: ignore[misc]  # celery is untyped
    def _event_process_exit(self, hub: Any, proc: Any) -> None:
        fd = getattr(proc, "_sentinel_poll", None)
        if fd is not None and not _readable(fd):
            # Readiness of another child's sentinel, read before that child was reaped
            # and its descriptor's number reused for this (live) child's: point 1 above.
            return
        super()._event_process_exit(hub, proc)

    def _track_child_process(self, proc: Any, hub: Any) -> None:
        if getattr(proc, "_sentinel_poll", False) is None:
            # Forgotten while the child stayed in the pool (point 2 above): Celery makes
            # a fresh copy of the sentinel when there is none.
            del proc._sentinel_poll
            popen = getattr(proc, "_popen", None)
            if popen is None or popen.sentinel is None:
                return  # already joined: the pool's maintenance removes it
        super()._track_child_process(proc, hub)


class TaskPool(prefork.TaskPool):  # type: ignore[misc]
    """Celery's prefork pool (``--pool prefork`` selects it, through ``worker_pool``)."""

    Pool = AsynPool


__all__ = ["AsynPool", "TaskPool"]
