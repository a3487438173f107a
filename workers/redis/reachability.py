"""Whether this worker reaches its broker's Redis, watched from a thread of its own.

Celery's consumer learns that Redis is gone only when one of its own commands times
out, from inside its event loop: behind a partition that drops packets without a reset,
that loop spends its time waiting on one socket timeout after another (the unacked
sweep, the binding refresh, an acknowledgement), and says nothing. An operator then
sees a silent worker. :class:`Reachability` PINGs the broker every :data:`INTERVAL`
seconds on a connection of its own, from a daemon thread the event loop cannot block,
and logs the moment Redis stops answering (``Redis unreachable from this worker``) and
the moment it answers again. The worker's event dispatcher reads :func:`unreachable`
to publish no heartbeat into a partition (workers/heartbeat.py).

The thread is started once the pool has forked (``worker_ready``): a thread alive at
fork time could hold a lock a child then waits on for ever.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from time import monotonic

from apportion.config.settings import Settings
from apportion.workers.redis.client import REDIS_ERRORS, error_text, make_redis

log = logging.getLogger("apportion.workers")

# Seconds between two PINGs, and how long one may take: a partition is logged within
# their sum (plus a thread's scheduling), well inside the 15 s an operator expects,
# while a slow but working Redis (hundreds of milliseconds a reply) is not reported.
INTERVAL = 2.0
PROBE_TIMEOUT = 3.0


class Reachability:
    """PINGs with ``ping`` (raising on failure) and says when the answers stop and resume.

    ``clock`` is injectable for tests; :meth:`check` is one probe, :meth:`start` runs
    them every ``interval`` seconds in a daemon thread until :meth:`stop`.
    """

    def __init__(
        self,
        ping: Callable[[], object],
        *,
        interval: float = INTERVAL,
        clock: Callable[[], float] = monotonic,
    ) -> None:
        self._ping = ping
        self._interval = interval
        self._clock = clock
        self._lost_at: float | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def reachable(self) -> bool:
        return self._lost_at is None

    def check(self) -> bool:
        """One PING; logs a change of state. Returns whether Redis answered."""
        try:
            self._ping()
        except REDIS_ERRORS as exc:
            if self._lost_at is None:
                self._lost_at = self._clock()
                log.warning(
                    "Redis unreachable from this worker (%s): jobs wait in Redis, none is "
                    "lost; time limits are enforced in the pool children meanwhile",
                    error_text(exc),
                )
            return False
        if self._lost_at is not None:
            log.warning("Redis reachable again after %.1f s", self._clock() - self._lost_at)
            self._lost_at = None
        return True

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="redis-reachability", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(PROBE_TIMEOUT + 1)
            self._thread = None

    def _run(self) -> None:
        while not self._stopping.wait(self._interval):
            self.check()


def for_broker(settings: Settings) -> Reachability:
    """A watch on the worker's broker, on a connection of its own: one reply timeout, no
    retries inside a probe (the next probe is the retry)."""
    client = make_redis(
        settings.broker,
        timeout=min(PROBE_TIMEOUT, settings.reply_timeout),
        retries=0,
        sentinel_master=settings.sentinel_master,
        sentinel_password=settings.sentinel_secret,
        health_check_interval=0,
        keepalive_options=settings.keepalive_options(),
    )
    return Reachability(client.ping)


_watch: Reachability | None = None


def watch(reachability: Reachability | None) -> None:
    """Install (or, with None, stop and remove) this process's watch."""
    global _watch
    if _watch is not None and _watch is not reachability:
        _watch.stop()
    _watch = reachability
    if reachability is not None:
        reachability.start()


def unreachable() -> bool:
    """Whether this process's watch last found Redis unreachable (False: no watch)."""
    return _watch is not None and not _watch.reachable


__all__ = ["INTERVAL", "PROBE_TIMEOUT", "Reachability", "for_broker", "unreachable", "watch"]
