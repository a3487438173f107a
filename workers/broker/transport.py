"""kombu's Redis transport with four fixes: a worker survives a Redis restart and a
SIGKILL without losing a job, and never idles while jobs wait.

The first two were found by tests/integration/test_faults_redis_restart.py (kombu 5.7,
a busy worker, ``redis-server`` restarted with SIGTERM), the third by
tests/integration/test_worker_killed.py, the fourth by the throughput benchmark
(bench/worker.md). They are small, and kept here until kombu fixes them; each is
exercised directly in tests/integration/test_faults_fixes.py.

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

3. **A SIGKILLed worker lost a job it had not yet recorded.** The same two-command gap,
   on a kill instead of a restart: ``BRPOP`` answered, the process killed before its
   ``HSET unacked``: the message was in no list any more (seen once in ~20 runs of
   tests/integration/test_worker_killed.py). Fix: while messages are waiting, the
   channel takes them with one Lua script that pops a message *and* records it in
   ``unacked`` (hash and index, as kombu's QoS.append writes them) in one atomic step
   on the server; a kill at any moment leaves every message either queued or
   unacknowledged, and the visibility timeout restores the latter. Only when every
   queue is empty does it block in ``BRPOP`` as kombu does, so an idle worker still
   wakes at once; the gap remains only for a message that arrives while the worker
   waits idle *and* a kill in the microseconds before it is recorded.

4. **A busy worker waited up to a second between jobs.** Messages taken by fix 3 are
   delivered inside the event loop's tick, where kombu only *sends* a ``BRPOP`` and
   delivers on its reply. Celery's pool registers its writes to the children in a tick
   callback of its own, and the tick callbacks are a ``set``: when the pool's ran first,
   the delivered jobs waited for the next tick, and with no ``BRPOP`` in flight nothing
   ended the loop's one-second wait. Which order a worker got depended on memory
   addresses, so some workers ran 50 jobs/s instead of 400 with idle CPUs (first blamed
   on the VM: bench/worker.md). Fix: after delivering, the channel rings a wake-up
   socket the loop watches, so the next tick comes at once.

Selected by ``broker_transport`` in config/celeryconfig.py for ``redis://`` and
``rediss://`` brokers (both are this transport in kombu).
"""

from __future__ import annotations

import logging
import socket
import threading
from contextlib import suppress
from time import time
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import dumps, loads

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


# KEYS: unacked index (zset), unacked (hash), then the queues in priority order.
# ARGV: the time to index the delivery by. Returns {queue, message} or false.
# The hash value is written as kombu's QoS.append writes it, dumps([raw, exchange,
# routing_key]), by concatenation: the raw message stays byte for byte as queued
# (cjson would re-encode it, turning [] into {}).
_POP_INTO_UNACKED = """
for i = 3, #KEYS do
  local item = redis.call('RPOP', KEYS[i])
  if item then
    local ok, message = pcall(cjson.decode, item)
    local props = ok and type(message) == 'table' and message['properties']
    local tag = type(props) == 'table' and props['delivery_tag']
    local info = type(props) == 'table' and props['delivery_info']
    if type(tag) == 'string' and type(info) == 'table' then
      redis.call('ZADD', KEYS[1], ARGV[1], tag)
      redis.call('HSET', KEYS[2], tag, '[' .. item .. ', ' ..
        cjson.encode(info['exchange'] or '') .. ', ' ..
        cjson.encode(info['routing_key'] or '') .. ']')
    end
    return {KEYS[i], item}
  end
end
return false
"""


class _Wakeup:
    """A socket pair the worker's event loop watches: ringing it ends the loop's wait.

    kombu's hub has a waker of its own, but rings it only for calls from other threads;
    this is rung from the loop's own thread (fix 4).
    """

    def __init__(self) -> None:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self._rung = False

    def fileno(self) -> int:
        return self._reader.fileno()

    def ring(self) -> None:
        if not self._rung:  # one byte wakes the loop however many deliveries there were
            self._rung = True
            with suppress(OSError):  # full or closed: the loop wakes anyway, or is gone
                self._writer.send(b"\0")

    def drain(self) -> None:
        self._rung = False
        with suppress(OSError):
            self._reader.recv(4096)

    def close(self) -> None:
        self._reader.close()
        self._writer.close()


class Channel(kombu_redis.Channel):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The connection info (URL, credentials, options) this channel was opened with.
        self._opened_with = args[0].client if args else kwargs["connection"].client
        self._no_ack_queues: set[str | None] = set()
        self._pop_script: Any = None
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
        # Queues consumed without acknowledgements (replies to control commands) must
        # not be recorded as unacknowledged: nothing would ever remove them (fix 3).
        no_ack = args[0] if args else kwargs.get("no_ack", False)
        if no_ack:
            self._no_ack_queues.add(queue)
        return super().basic_consume(queue, *args, **kwargs)

    def basic_cancel(self, consumer_tag: str) -> Any:
        self._no_ack_queues.discard(self._tag_to_queue.get(consumer_tag))
        return super().basic_cancel(consumer_tag)

    def pop_into_unacked(self, keys: list[str]) -> tuple[str, str] | None:
        """Atomically take the next message of ``keys`` and record it as unacknowledged."""
        if self._pop_script is None:  # lazily: the channel's client is made on first use
            self._pop_script = self.client.register_script(_POP_INTO_UNACKED)
        found = self._pop_script(
            keys=[self.unacked_index_key, self.unacked_key, *keys], args=[time()]
        )
        if not found:
            return None
        dest, item = found
        return bytes_to_str(dest), bytes_to_str(item)

    def _brpop_start(self, timeout: Any = None) -> Any:
        # Fix 3 above: take waiting messages atomically into ``unacked``, up to what
        # the prefetch allows; block in kombu's BRPOP only when every queue is empty.
        # Messages taken here are delivered now, like a BRPOP answer would be on the
        # next loop turn, and ``_in_poll`` stays unset so the next turn asks again.
        if (
            self.global_keyprefix
            or not self.active_queues
            or not self._no_ack_queues.isdisjoint(self.active_queues)
        ):
            return super()._brpop_start(timeout)
        budget = max(1, self.qos.prefetch_count or 1)
        while budget > 0 and self.qos.can_consume():
            queues = self._queue_cycle.consume(len(self.active_queues))
            if not queues:
                return None
            keys = [self._q_for_pri(q, pri) for pri in self.priority_steps for q in queues]
            found = self.pop_into_unacked(keys)
            if found is None:
                return super()._brpop_start(timeout)
            dest, item = found
            dest = dest.rsplit(self.sep, 1)[0]
            self._queue_cycle.rotate(dest)
            self.connection._deliver(loads(item), dest)
            self.connection.wake_event_loop()  # fix 4
            budget -= 1
        return None


class Transport(kombu_redis.Transport):
    Channel = Channel
    _wakeup: _Wakeup | None = None

    def register_with_event_loop(self, connection: Any, loop: Any) -> None:
        super().register_with_event_loop(connection, loop)
        # Called again with the same loop after every reconnection: one wake-up a loop.
        old = self._wakeup
        if old is not None:
            loop.remove_reader(old.fileno())
            old.close()
        wakeup = self._wakeup = _Wakeup()
        loop.add_reader(wakeup.fileno(), wakeup.drain)

    def wake_event_loop(self) -> None:
        """End the event loop's current wait (no-op outside a worker's event loop)."""
        if self._wakeup is not None:
            self._wakeup.ring()

    def _deliver(self, message: Any, queue: str) -> None:
        try:
            super()._deliver(message, queue)
        except self.connection_errors:
            if isinstance(message, dict) and queue:
                UNDELIVERED.keep(message, queue)
            raise
