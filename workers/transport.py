"""kombu's Redis transport with two fixes, so a worker survives a Redis restart.

Both were found by tests/integration/test_faults_redis_restart.py (kombu 5.7, a busy
worker, ``redis-server`` restarted with SIGTERM); they are small, and kept here until
kombu fixes them.

1. **The worker stopped consuming for good.** When the connection to Redis is lost while
   the worker holds unacknowledged messages, Celery's consumer closes the dead
   connection twice (``collect()``, then ``close()``). The first close fails half-way
   (a Redis call raises ``ConnectionError``, which kombu swallows) and leaves the channel
   open, after which kombu detaches the connection info from the transport. The second
   close restores the unacknowledged messages, needs a new connection pool, and reads the
   connection info it no longer has::

       CRITICAL/MainProcess] Unrecoverable error: AttributeError("'NoneType' object has
       no attribute 'hostname'")   (kombu/transport/redis.py, Channel._connparams)

   Fix: a channel remembers the connection info it was opened with, so a late
   close can still reach Redis — or, with Redis still down, fails with an ordinary
   connection error that kombu handles (the messages stay in the ``unacked`` hash and
   are redelivered after the visibility timeout, as after a SIGKILL).

2. **A job vanished.** A message is taken off its queue by ``BRPOP`` and only then
   recorded in the ``unacked`` hash (a second command). When Redis shuts down right after
   answering a ``BRPOP``, the worker reads the message while closing the connection and
   cannot record it: it was in no list any more, and nowhere else. Fix: a message whose
   delivery failed on a connection error is kept in memory and pushed back onto its
   queue as soon as the worker consumes again on a new connection. If it had been
   recorded after all, the job runs twice, which apportion's once-per-job_id publishing
   makes harmless.

Selected by ``broker_transport`` in config/celeryconfig.py for ``redis://`` and
``rediss://`` brokers (both are this transport in kombu).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps

log = logging.getLogger("apportion.transport")


class _Undelivered:
    """Messages read from a queue whose delivery failed on a lost connection."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._messages: list[tuple[dict[str, Any], str]] = []

    def keep(self, message: dict[str, Any], queue: str) -> None:
        with self._lock:
            self._messages.append((message, queue))
        log.warning(
            "a message from queue %s was read as the connection to Redis was lost; "
            "it is kept and requeued on reconnection",
            queue,
        )

    def requeue(self, channel: Channel) -> None:
        with self._lock:
            if not self._messages:
                return
            pending, self._messages = self._messages, []
        done = 0
        try:
            with channel.conn_or_acquire() as client:
                for message, queue in pending:
                    priority = channel._get_message_priority(message, reverse=False)
                    # RPUSH: the consuming end (BRPOP), so it is the next one served,
                    # as kombu's own restore does.
                    client.rpush(channel._q_for_pri(queue, priority), dumps(message))
                    done += 1
        except channel.connection_errors:
            with self._lock:
                self._messages[:0] = pending[done:]
        if done:
            log.warning("requeued %d message(s) read just before a Redis connection loss", done)


UNDELIVERED = _Undelivered()


class Channel(kombu_redis.Channel):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The connection info (URL, credentials, options) this channel was opened with.
        self._opened_with = args[0].client if args else kwargs["connection"].client
        super().__init__(*args, **kwargs)

    def _connparams(self, asynchronous: bool = False) -> Any:
        transport = self.connection
        if transport is None or transport.client is not None:
            return super()._connparams(asynchronous=asynchronous)
        # kombu detached the connection info (fix 1 above): build the pool from the
        # info this channel was opened with. The worker's event loop is one thread.
        transport.client = self._opened_with
        try:
            return super()._connparams(asynchronous=asynchronous)
        finally:
            transport.client = None

    def basic_consume(self, queue: str, *args: Any, **kwargs: Any) -> Any:
        UNDELIVERED.requeue(self)
        return super().basic_consume(queue, *args, **kwargs)


class Transport(kombu_redis.Transport):
    Channel = Channel

    def _deliver(self, message: Any, queue: str) -> None:
        try:
            super()._deliver(message, queue)
        except self.connection_errors:
            if isinstance(message, dict) and queue:
                UNDELIVERED.keep(message, queue)
            raise
