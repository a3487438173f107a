"""kombu's Redis and Sentinel transports with seven fixes: a worker survives a Redis
restart, a failover, a SIGKILL and a Redis that refuses writes without losing a job,
never idles while jobs wait, no queue item can stop it, and no pub/sub read hangs it.

Each is small, kept here until kombu fixes it, and exercised directly in
tests/integration/test_faults_fixes.py; the fault tests (Redis restarted or failed over
under a busy worker, workers killed) show them end to end.

1. **A worker must not stop consuming for good.** When the connection to Redis is lost
   while the worker holds unacknowledged messages, Celery's consumer closes the dead
   connection twice (``collect()``, then ``close()``). The first close fails half-way
   (a Redis call raises ``ConnectionError``, which kombu swallows) and leaves the channel
   open, after which kombu detaches the connection info from the transport. The second
   close restores the unacknowledged messages, needs a new connection pool, and reads the
   connection info it no longer has::

       CRITICAL/MainProcess] Unrecoverable error: AttributeError("'NoneType' object has
       no attribute 'hostname'")   (kombu/transport/redis.py, Channel._connparams)

   Fix: a channel remembers the connection info it was opened with, so a late
   close can still reach Redis (the Sentinel channel's list of sentinels included) —
   or, with Redis still down, fails with an ordinary connection error that kombu
   handles (the messages stay in the ``unacked`` hash and are redelivered after the
   visibility timeout, as after a SIGKILL).

2. **A message read as the connection dies must not vanish.** kombu takes a message off
   its queue with ``BRPOP``: when the reply is lost (Redis restarted, failed over, or
   the connection died silently: a dead NAT entry sends no reset), the message is in
   no list any more, and nowhere else. Fix: a take never leaves a message only on the
   wire. It moves it (``LMOVE``, or ``BLMOVE`` when idle) into the channel's *taking
   list* on the server (one per connection and queue, registered with a liveness score
   in ``{prefix}:takers``), and only then records it (fix 3). A connection whose take
   got no reply is abandoned: its lists go back on their queues as soon as the worker
   reaches Redis again, and any worker puts back the lists of a worker that stopped
   refreshing its score (dead, or partitioned) after ``taker_ttl``. What kombu's own
   ``BRPOP`` still takes (queues without acknowledgements, a global key prefix) and
   fails to deliver on a connection error is kept in memory and pushed back onto its
   queue on reconnection.

3. **A SIGKILLed worker must not lose a job it had not yet recorded.** Fix: the move
   above is atomic on the server, and the record is one MULTI/EXEC that drops the
   message from the taking list and writes it into ``unacked`` (hash and index, as
   kombu's QoS.append writes them) with its delivery count: a kill at any moment leaves
   every message queued, in a taking list, or unacknowledged, and the liveness score or
   the visibility timeout restores it. A record whose reply was lost (it may have run)
   is undone as soon as the worker reaches Redis again: the message goes back on its
   queue and its count down by one, unless the record is no longer that take's (its
   score in the unacked index is the take's stamp), so a delivery that never happened
   is never counted. Redis moves bytes only: the worker's main
   process reads the message (the gate, fix 5), and no Lua script ever holds one (a
   big string in Lua costs Redis milliseconds). While messages wait, every turn of the
   event loop moves them without blocking; only when every queue is empty does the
   channel block in ``BLMOVE``, so an idle worker still wakes at once (one list at a
   time: a worker consuming several queues waits on each in turn for a tenth of a
   second).

4. **A busy worker must not wait between jobs.** Messages taken by fix 3 are delivered
   inside the event loop's tick, where kombu only *sends* a blocking take and delivers on
   its reply. Celery's pool registers its writes to the children in a tick callback of
   its own, and the tick callbacks are a ``set``: when the pool's ran first, the
   delivered jobs waited for the next tick, and with no blocking take in flight nothing
   ended the loop's one-second wait. Which order a worker got depends on memory
   addresses. Fix: after delivering, the channel rings a wake-up socket the loop
   watches, so the next tick comes at once.

5. **One message must not stop every worker.** The main process decodes each message
   and pickles its arguments to a pool child; a deeply nested body raises
   ``RecursionError`` there, and malformed queue items (not JSON, a JSON array,
   ``properties`` null, ``headers`` a string, a body that is an object, not base64 or not
   ``[args, kwargs, embed]``) raise inside the consumer loop: the worker dies, the
   message is restored and kills the next worker. Fix: every item taken off a queue
   passes the gate (workers/broker/gate.py) before kombu or Celery see it. What it
   cannot run is dead-lettered (workers/broker/dead_letters.py) and acknowledged; the
   rest is rebuilt from whitelisted, bounded parts. Burying moves the item from the
   taking list to the dead letters in one transaction; the record counts deliveries
   per delivery tag: a message handed out
   ``quarantine_after`` times without an answer (each time its worker or pool child
   died; its published marker is checked first) is quarantined to the dead letters
   instead of being delivered again. The count
   is forgotten when the delivery ends in an acknowledgement, a rejection, or a requeue
   the task asked for, and for messages given back at shutdown that never reached a
   pool child (see :class:`QoS`); a pool child that died keeps it
   (workers/broker/requests.py tells the channel).

6. **A Redis that refuses must not stop the fleet.** Past ``maxmemory`` (``noeviction``),
   as a read-only replica, or with persistence failing (MISCONF), Redis answers but
   refuses writes. A job whose result cannot be published asks to be requeued, and
   kombu's requeue (a transaction) is refused too: kombu raises the reply, which Celery
   takes for the end of the worker (``Unrecoverable error: OutOfMemoryError``), and
   every worker meeting it exited. Fix: every Redis call the transport makes from the
   event loop treats such a reply (:func:`refused`) as an outage. An acknowledgement or
   requeue Redis refused (or that could not reach it: a partition that heals without a
   reset never restarts Celery's consumer, which would free its prefetch slot) leaves
   the message in ``unacked`` and in the worker's prefetch (it takes no more work
   meanwhile) and is tried again every second or so with a
   backoff up to 5 s, so a requeued job runs again within seconds of Redis accepting
   writes, not after the visibility timeout; a refused take waits with the same
   backoff; an item already taken whose record or burial is refused goes back on its
   queue, even out of memory (the restore and undo scripts below), and is taken again
   after the same backoff: a message Redis refused to dead-letter or quarantine is
   buried within seconds of Redis accepting writes again. While the worker's
   reachability watch (workers/redis/reachability.py) finds Redis unreachable, the
   transport's timers, kombu's unacked sweep and binding refresh, and acknowledgements
   send nothing: each would hold the event loop (which fires the time limits) for a
   reply timeout; they resume when the watch hears Redis again. Celery's
   ``broker_channel_error_retry`` (config/celeryconfig.py) reconnects on any refusal
   that still escapes.

7. **A dropped pub/sub connection must not hang the worker.** Fix: the event loop's
   reads of the pub/sub (remote control) connection never wait for a message
   (:class:`_ListenPubSub`); one dropped meanwhile is left to kombu's next tick, which
   subscribes again, instead of redis-py reconnecting it unsubscribed and waiting.

Tasks trust what the gate writes into a message (its verdict header), so every broker
scheme the settings accept has a gated transport here: :class:`Transport` for
``redis://`` and ``rediss://``, :class:`SentinelTransport` for ``sentinel://``
(selected by ``broker_transport`` in config/celeryconfig.py), and a worker refuses any
other (workers/app.py). Its own options arrive as the ``apportion_gate`` transport
option (config/celeryconfig.py).
"""

from __future__ import annotations

import logging
import socket
import threading
import uuid
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cached_property
from queue import Empty
from time import monotonic, sleep, time
from typing import Any

import redis
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import dumps, loads

from apportion.errors import StoreUnavailable
from apportion.limits import Limits
from apportion.workers.broker.dead_letters import DeadLetterPolicy, DeadLetters
from apportion.workers.broker.gate import Bury, Deliver, GateRules, answer_id, inspect
from apportion.workers.redis.client import is_outage
from apportion.workers.redis.direct import DirectScripts, LuaScript
from apportion.workers.redis.keys import Keys
from apportion.workers.redis.reachability import unreachable

log = logging.getLogger("apportion.transport")


class _Undelivered:
    """Messages read from a queue whose delivery failed on a lost connection."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._messages: list[tuple[dict[str, Any] | str, str]] = []

    def keep(self, message: dict[str, Any] | str, queue: str) -> None:
        """``message``: a decoded message, or a raw item as queued; ``queue``: its queue
        (a raw item's list key, priority suffix included)."""
        with self._lock:
            self._messages.append((message, queue))
        log.warning(
            "a message from queue %s was read as the connection to Redis was lost; "
            "it is kept and requeued on reconnection",
            queue,
        )

    def __bool__(self) -> bool:
        return bool(self._messages)

    def requeue(self, channel: Channel) -> None:
        with self._lock:
            if not self._messages:
                return
            pending, self._messages = self._messages, []
        done = 0
        try:
            with channel.conn_or_acquire() as client:
                for message, queue in pending:
                    # RPUSH: the consuming end (BRPOP), so it is the next one served,
                    # as kombu's own restore does.
                    if isinstance(message, str):
                        client.rpush(queue, message)
                    else:
                        priority = channel._get_message_priority(message, reverse=False)
                        client.rpush(channel._q_for_pri(queue, priority), dumps(message))
                    done += 1
        except (*channel.connection_errors, redis.ResponseError) as exc:
            with self._lock:
                self._messages[:0] = pending[done:]
            if not (isinstance(exc, channel.connection_errors) or refused(exc)):
                raise
        if done:
            log.warning("requeued %d message(s) read just before a Redis connection loss", done)


UNDELIVERED = _Undelivered()


def refused(exc: BaseException) -> bool:
    """Whether ``exc`` is a reply by which a reachable Redis says it cannot serve now
    (out of memory, read-only, MISCONF, BUSY, ...: workers/redis/client.py, is_outage).

    kombu reconnects on connection errors; these are replies on a healthy connection,
    which kombu counts as channel errors and Celery's consumer as the end of the worker.
    Every Redis call the transport makes from the event loop handles them itself: the
    message stays where it is (queued, or in ``unacked``) and the call is tried again
    with a backoff, never taken out on the consumer loop.
    """
    return isinstance(exc, redis.ResponseError) and is_outage(exc)


class _Backoff:
    """When to try again after Redis refused: 0.25 s, doubling up to 5 s, reset on success."""

    FIRST, MOST = 0.25, 5.0

    def __init__(self) -> None:
        self._delay = 0.0
        self._until = 0.0

    def waiting(self) -> bool:
        return monotonic() < self._until

    def failed(self) -> float:
        self._delay = min(self.MOST, max(self.FIRST, self._delay * 2))
        self._until = monotonic() + self._delay
        return self._delay

    def succeeded(self) -> bool:
        """True when this ends a run of failures."""
        was = self._delay > 0
        self._delay = self._until = 0.0
        return was


# How a worker takes a job (fixes 2, 3 and 5), in two steps, Redis moving bytes only:
#
# 1. *Move*: the item goes from its queue list into the channel's taking list
#    (Keys.taking: one per channel connection and queue list), atomically on the
#    server, with LMOVE while items wait and BLMOVE when the worker is idle. The item is
#    never only in a reply on the wire: a reply lost with its connection leaves it in
#    the taking list.
# 2. *Settle*: the worker's main process reads it (the gate, workers/broker/gate.py,
#    decodes it in Python), then one MULTI/EXEC drops it from the taking list and
#    records it in ``unacked`` (hash and index, as kombu's QoS.append writes them) with
#    its delivery count, or buries it in the dead letters.
#
# Every command that carries the item is a plain one (LMOVE, BLMOVE, HSET, XADD): a
# string of a few hundred kilobytes passed into or out of a Lua script costs Redis a
# millisecond or more, which is what capped one Redis at a few hundred big jobs a
# second. The scripts below never see an item on the hot path.
#
# A taking list whose channel is gone is put back on its queue (:data:`_RESTORE`): the
# channel's own worker does it as soon as it reconnects, and any worker does it for a
# list whose worker stopped saying it is alive (the Keys.takers sorted set). Neither
# touches the delivery count, so quarantine counts every delivery that reached a worker.

# The first of KEYS (queue lists, in priority order) holding an item, or false.
_FIRST = LuaScript("""
for i = 1, #KEYS do
  if redis.call('LLEN', KEYS[i]) > 0 then return KEYS[i] end
end
return false
""")

# A taking list back onto its queue, at the consuming end and oldest first (as kombu's
# own restore). KEYS: taking list, its queue list, takers. ARGV: '1' to also forget
# the list in takers. Returns how many items went back. Rare (a lost connection, a dead
# worker), so it may carry items through Lua. Under out-of-memory Redis refuses a
# script's memory-growing command only while the script has written nothing yet ("we
# can't stop in the middle"): it starts with a write that grows nothing, so a list
# goes back even then (tests/integration/test_redis_cannot_serve.py checks Redis still
# works so).
_RESTORE = LuaScript("""
redis.call('ZREM', KEYS[3], '')
local n = 0
while redis.call('LMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT') do n = n + 1 end
if ARGV[1] == '1' then redis.call('ZREM', KEYS[3], KEYS[1]) end
return n
""")

# Out of memory only: the move and the record as scripts. Past maxmemory Redis refuses
# LMOVE and HSET (they may grow memory), but not a script that has already written
# (see _RESTORE), so these start with a write that grows nothing. They carry the item
# through Lua, which costs milliseconds a big job: worth it only while the plain
# commands are refused, so that a worker still takes and records jobs then.
# KEYS: takers, queue list, taking list. ARGV: now. Returns the item, or false.
_MOVE_OUT_OF_MEMORY = LuaScript("""
redis.call('ZREM', KEYS[1], '')
local item = redis.call('LMOVE', KEYS[2], KEYS[3], 'RIGHT', 'LEFT')
if item then redis.call('ZADD', KEYS[1], ARGV[1], KEYS[3]) end
return item
""")
# KEYS: taking list, unacked index, unacked, delivery-count key. ARGV: now (the take's
# stamp), tag, the exchange and routing key (JSON strings), the count's TTL. Returns
# {held, items left in the taking list, delivery count}; nothing is recorded when the
# item was not held. A replay of the same take (its reply lost, the script sent again)
# finds its own record by the stamp and counts nothing twice.
_SETTLE_OUT_OF_MEMORY = LuaScript("""
local stamp = redis.call('ZSCORE', KEYS[2], ARGV[2])
if stamp and tonumber(stamp) == tonumber(ARGV[1]) then
  return {1, redis.call('LLEN', KEYS[1]), tonumber(redis.call('GET', KEYS[4]) or '0')}
end
local item = redis.call('LPOP', KEYS[1])
local left = redis.call('LLEN', KEYS[1])
if not item then return {0, left, 0} end
local n = redis.call('INCR', KEYS[4])
redis.call('EXPIRE', KEYS[4], ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[2], '[' .. item .. ', ' .. ARGV[3] .. ', ' .. ARGV[4] .. ']')
return {1, left, n}
""")

# A take's record undone: the item goes back on its queue, out of ``unacked``, and its
# delivery count as it was before the take, but only if the record is still the take's
# own (its index score is the take's stamp). For a record whose reply was lost (it may
# or may not have run) or whose quarantine Redis refused: the take delivered nothing,
# so it must not count. Starts with a write that grows nothing (see _RESTORE).
# KEYS: unacked index, unacked, delivery-count key, queue list. ARGV: tag, stamp, item.
# Returns 1 when undone, 0 when there was nothing of the take's to undo.
_UNDO_RECORD = LuaScript("""
local stamp = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not stamp or tonumber(stamp) ~= tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('DECR', KEYS[3]) <= 0 then redis.call('DEL', KEYS[3]) end
redis.call('RPUSH', KEYS[4], ARGV[3])
return 1
""")

# The end of a delivery (an ack, or a reject without requeue): the message leaves
# ``unacked`` (index and hash, as kombu's QoS removes it) and its delivery count goes.
# KEYS: unacked index, unacked, delivery-count key. ARGV: the delivery tag.
_FORGET = LuaScript("""
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[3])
return 1
""")

# Items buried in one event-loop tick before the loop gets a turn (a flood of garbage
# must not starve the worker's heartbeat and acknowledgements).
_BURY_PER_TICK = 100
# How long a channel consuming several queues waits on one of them in BLMOVE before
# it looks at all of them again (see Channel._block): the longest a job waits for an
# idle worker then.
_TURN_SECONDS = 0.1
# How often each worker looks for taking lists of dead workers (one ZRANGEBYSCORE).
_REAP_SECONDS = 5.0
# The longest one pub/sub read from the event loop waits for the rest of a reply that
# began to arrive, when the connection has no socket timeout of its own (fix 7).
_LISTEN_READ = 5.0


@dataclass(frozen=True, slots=True)
class GateOptions:
    """The ``apportion_gate`` transport option, as a value (config/celeryconfig.py)."""

    rules: GateRules = field(default_factory=GateRules)
    keys: Keys = field(default_factory=Keys)
    quarantine_after: int = 2
    count_ttl: int = 86_400
    dead_letters: DeadLetterPolicy = field(default_factory=DeadLetterPolicy)
    # A taking list (see _FIRST) whose worker has not said it is alive for this long is
    # put back on its queue by any worker; a worker says so every third of it. Longer
    # than any stall of a live worker's event loop, short enough to bring a job back
    # from a dead worker's list quickly (its own worker does it at once on reconnecting).
    taker_ttl: float = 30.0
    # How long a dead list stays watched: a take sent on a dead connection may still
    # reach Redis late (TCP retransmits for up to ~15 minutes).
    taker_forget: float = 3600.0

    @classmethod
    def from_option(cls, option: Mapping[str, Any] | None) -> GateOptions:
        if not option:
            return cls()
        limits = Limits(**option.get("limits", {}))
        tasks = option.get("tasks")
        return cls(
            rules=GateRules(
                limits=limits,
                max_message_bytes=option["max_message_bytes"],
                tasks=dict(tasks) if tasks is not None else None,
                max_eta_seconds=option["max_eta_seconds"],
            ),
            keys=Keys(option["prefix"]),
            quarantine_after=option["quarantine_after"],
            count_ttl=option["count_ttl"],
            dead_letters=DeadLetterPolicy(
                maxlen=option["dead_letter_maxlen"],
                max_age_seconds=option["dead_letter_max_age"],
                copy_bytes=option["dead_letter_copy_bytes"],
            ),
        )


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


class QoS(kombu_redis.QoS):
    """kombu's QoS that also forgets a message's delivery count when its delivery ended.

    The take's record (Channel._settle) counts every delivery of a message (by tag).
    The count is deleted when the delivery ends in an acknowledgement or a rejection, including a
    requeue the task asked for (a job waiting for Redis to come back), but not when a
    pool child died running it (:meth:`child_died`, called from the task's request,
    workers/broker/requests.py) and not when the worker's main process vanished (nothing
    runs then). Messages given back at shutdown (:meth:`restore_unacked`) keep their
    count only if they had reached a pool child (:meth:`handed_to_pool`): the warm
    shutdown finishes running jobs, so what is given back unstarted did no harm.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._handed: set[str] = set()
        self._died: set[str] = set()
        # Ends of deliveries Redis refused (tag -> requeue?): the message stays in
        # ``unacked`` and in this QoS's prefetch (the worker takes no more work while
        # Redis refuses), and the end is tried again (:meth:`retry_refused`).
        self._refused: dict[str, tuple[bool, bool]] = {}
        self._backoff = _Backoff()
        _REFUSING.add(self)

    def handed_to_pool(self, delivery_tag: str) -> None:
        self._handed.add(delivery_tag)

    def child_died(self, delivery_tag: str) -> None:
        self._died.add(delivery_tag)

    def _count_key(self, delivery_tag: str) -> str:
        channel: Channel = self.channel
        return channel.gate.keys.delivery_count(delivery_tag)

    def append(self, message: Any, delivery_tag: str) -> None:
        channel: Channel = self.channel
        if channel.recorded_by_script(delivery_tag):
            # The take recorded it in ``unacked`` already, byte for byte as it was
            # queued: only kombu's in-memory bookkeeping is left to do. kombu's own
            # append would write it a second time (a MULTI round trip a job).
            virtual.QoS.append(self, message, delivery_tag)
            return
        super().append(message, delivery_tag)

    def ack(self, delivery_tag: str) -> None:
        self._handed.discard(delivery_tag)
        self._died.discard(delivery_tag)
        self._end(delivery_tag, requeue=False)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        self._handed.discard(delivery_tag)
        died = delivery_tag in self._died
        self._died.discard(delivery_tag)
        self._end(delivery_tag, requeue=requeue, clear_count=requeue and not died)

    def _end(self, delivery_tag: str, *, requeue: bool, clear_count: bool = False) -> None:
        """End a delivery in Redis (forget it, or put it back on its queue), then in
        kombu's bookkeeping; when Redis refuses or cannot be reached, keep it for
        :meth:`retry_refused`."""
        try:
            if unreachable():  # it would hold the event loop for a reply timeout
                raise redis.ConnectionError("the reachability watch finds Redis unreachable")
            self._end_in_redis(delivery_tag, requeue=requeue, clear_count=clear_count)
        except (*self.channel.connection_errors, redis.ResponseError) as exc:
            if isinstance(exc, redis.ResponseError) and not refused(exc):
                raise
            # Unreachable too, not only refused: kombu frees the delivery's prefetch
            # slot only once its end reached Redis, and Celery merely logs a failed ack.
            # A partition that heals without a reset never makes the consumer reconnect
            # (which would open a fresh QoS), so each lost ack would hold its slot for
            # good and, once every slot is held, the worker would never take again.
            # Ending a delivery twice is harmless (the message is gone from ``unacked``,
            # or restored by the visibility timeout and answered once by its job_id).
            self._refused[delivery_tag] = (requeue, clear_count)
            if not isinstance(exc, redis.ResponseError):
                self._backoff.failed()  # each try may wait a socket timeout meanwhile
            log.warning(
                "Redis %s %s message %s (%s); it stays unacknowledged and this is tried again",
                "refused to" if isinstance(exc, redis.ResponseError) else "unreachable: cannot",
                "requeue" if requeue else "acknowledge",
                delivery_tag,
                exc,
            )
            return
        virtual.QoS.ack(self, delivery_tag)

    def _end_in_redis(self, delivery_tag: str, *, requeue: bool, clear_count: bool) -> None:
        if requeue:
            if clear_count:
                with self.channel.conn_or_acquire() as client:
                    client.delete(self._count_key(delivery_tag))
            # kombu's transaction: refused as a whole (the message stays in
            # ``unacked``), or the message is back on its queue and out of ``unacked``.
            self.restore_by_tag(delivery_tag, leftmost=True)
        else:
            self._forget(delivery_tag)

    def retry_refused(self) -> None:
        """Try again the ends of deliveries Redis refused, with a backoff (called by the
        transport's timer every second, from the event loop)."""
        if not self._refused or self._backoff.waiting():
            return
        ended = 0
        for tag, (requeue, clear_count) in list(self._refused.items()):
            try:
                self._end_in_redis(tag, requeue=requeue, clear_count=clear_count)
            except redis.ResponseError as exc:
                if not refused(exc):
                    raise
                delay = self._backoff.failed()
                log.debug("Redis still refuses (%s); next try in %.2f s", exc, delay)
                break
            except self.channel.connection_errors:
                self._backoff.failed()  # the consumer reconnects; tried again after
                break
            del self._refused[tag]
            virtual.QoS.ack(self, tag)
            ended += 1
        else:
            self._backoff.succeeded()
        if ended:
            log.warning(
                "Redis accepts writes again: %d delivery(ies) it had refused to end are "
                "ended (requeued messages run again now)",
                ended,
            )

    def _forget(self, delivery_tag: str) -> None:
        channel: Channel = self.channel
        if channel.global_keyprefix:  # only the client prefixes keys, not the scripts
            pipe = self._remove_from_indices(delivery_tag)
            pipe.delete(self._count_key(delivery_tag)).execute()
            return
        keys = [self.unacked_index_key, self.unacked_key, self._count_key(delivery_tag)]
        channel.scripts.run(channel.pool, _FORGET, keys, [delivery_tag])

    def restore_visible(self, *args: Any, **kwargs: Any) -> Any:
        if unreachable():
            return None  # see _retry_refused: the next sweep after Redis answers again
        # The sweep takes a lock (a SET, refused under OOM): Redis refusing ends this
        # sweep, the next one tries again.
        try:
            return super().restore_visible(*args, **kwargs)
        except redis.ResponseError as exc:
            if not refused(exc):
                raise
            log.debug("restoring timed-out messages: Redis refused (%s)", exc)
            return None

    def restore_unacked(self, client: Any = None) -> Any:
        unstarted = [tag for tag in self._delivered if tag not in self._handed]
        self._handed.clear()
        self._died.clear()
        self._refused.clear()
        try:
            if unstarted:
                with (
                    suppress(*self.channel.connection_errors),
                    self.channel.conn_or_acquire(client) as conn,
                ):
                    conn.delete(*(self._count_key(tag) for tag in unstarted))
            return super().restore_unacked(client)
        except redis.ResponseError as exc:
            if not refused(exc):
                raise
            # What could not be given back stays in ``unacked``: the visibility timeout
            # redelivers it, as after a kill.
            log.warning(
                "Redis refused to give back %d unacknowledged message(s) (%s); they are "
                "redelivered after the visibility timeout",
                len(self._delivered),
                exc,
            )
            self._delivered.clear()
            return None


# Every QoS that may hold deliveries Redis refused to end (Transport's timer retries them).
_REFUSING: weakref.WeakSet[QoS] = weakref.WeakSet()
# Every channel that takes jobs (Transport's timer keeps their taking lists alive).
_TAKERS: weakref.WeakSet[Channel] = weakref.WeakSet()
# Taking lists this process gave up (Channel._abandon), until they are back on their
# queues: shared, so that the channel kombu opens after a connection loss puts back
# what the closed one could not.
_ABANDONED: list[str] = []
# When this process last looked for taking lists of dead workers (Channel.keep_taking).
_REAPED_AT = [monotonic()]


@dataclass(frozen=True, slots=True)
class _Undo:
    """A take's record to undo (:data:`_UNDO_RECORD`) once Redis is reached: one whose
    reply was lost (it may have run), or whose quarantine Redis refused. The take
    delivered nothing, so the message goes back on its queue uncounted."""

    keys: tuple[str, str, str, str]  # unacked index, unacked, delivery count, queue list
    tag: str
    stamp: float  # the record's score in the unacked index: which take wrote it
    item: bytes


# Records to undo (Channel._restore_abandoned), shared like _ABANDONED: the channel
# that took the message is usually closed by the time Redis is reached again.
_UNDO: list[_Undo] = []


class MainProcessArgs(list):  # type: ignore[type-arg]
    """A job message's ``args`` as the worker's main process holds them: the whole job,
    which a pickle (the hand-off to a pool child) leaves out.

    Celery's request sends a pool child both the message's body, which the child decodes
    into the task's arguments, and its request, which holds the arguments the main
    process decoded; the child overwrites those with its own. Pickled, a big job's
    arguments cost the main process and the child more than the child's own decode of
    the body (bench/worker.md); the main process keeps them (a hard time limit's answer
    is the job's)."""

    def __reduce__(self) -> tuple[type[list[Any]], tuple[()]]:
        return list, ()


class Message(virtual.Message):
    """kombu's message, carrying the body the gate decoded (:attr:`Deliver.call`).

    The gate reads every message's ``[args, kwargs, embed]`` from its JSON; Celery's
    consumer then asks kombu for the same (``message.payload``), which would decode the
    JSON a second time in the worker's main process. Its ``args`` are
    :class:`MainProcessArgs`.
    """

    def __init__(self, payload: Any, channel: Any = None, **kwargs: Any) -> None:
        super().__init__(payload, channel=channel, **kwargs)
        decoded = getattr(channel, "gate_decoded", None)
        if decoded is not None and decoded[0] == self.delivery_tag:
            args, call_kwargs, embed = decoded[1]
            self._decoded_cache = [MainProcessArgs(args), call_kwargs, embed]


class _ListenPubSub(redis.client.PubSub):
    """kombu's pub/sub client (fanout queues: Celery's remote control), read only as far
    as what the socket holds (fix 7).

    kombu reads it from the event loop with redis-py's blocking read. A connection
    dropped meanwhile (kombu's health check drops one that missed its PINGs) is
    connected afresh by that read, subscribed to nothing (kombu resubscribes on its next
    tick, never inside redis-py's reconnection), and the read then waits for a message
    that never comes: the worker's whole loop with it, until the connection dies.
    """

    def parse_response(self, block: bool = True, timeout: float = 0) -> Any:
        conn = self.connection
        if conn is None or not conn.is_connected:
            return None
        try:
            if not conn.can_read(timeout=0):
                return None
        except redis.ConnectionError:
            # Closed by the server: dropped, so that kombu's next tick reconnects and
            # subscribes again (what redis-py's own read does on an error).
            conn.disconnect()
            raise
        # Readable: a whole reply is there or on its way; a stalled one ends with the
        # socket timeout (a connection error kombu reconnects on).
        return super().parse_response(block=False, timeout=conn.socket_timeout or _LISTEN_READ)


class Channel(kombu_redis.Channel):
    QoS = QoS
    Message = Message
    # (delivery tag, decoded body) of the message being delivered (see Message).
    gate_decoded: tuple[str, list[Any]] | None = None
    # apportion's own options (GateOptions), passed like kombu's in broker_transport_options.
    from_transport_options = (  # type: ignore[assignment]
        *kombu_redis.Channel.from_transport_options,
        "apportion_gate",
    )
    apportion_gate: Mapping[str, Any] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The connection info (URL, credentials, options) this channel was opened with.
        self._opened_with = args[0].client if args else kwargs["connection"].client
        self._no_ack_queues: set[str | None] = set()
        # The scripts of every job (pop, ack) on a connection of their own (see there).
        self.scripts = DirectScripts()
        self._sync_client: Any = None
        # Delivery tags the scripts recorded in ``unacked``, until kombu's QoS.append.
        self._recorded: set[str] = set()
        # Redis refused to hand out messages (out of memory, read-only): wait before
        # asking again.
        self._refusing = _Backoff()
        # Names this channel's taking lists (Keys.taking); a new one whenever a take may
        # have been lost with its connection, so such a list is never written again.
        self._token = uuid.uuid4().hex
        self._lists: set[str] = set()  # this token's lists, registered in takers
        self._alive_at = 0.0
        # (queue list, taking list) of the BLMOVE in flight, until its reply is read.
        self._blocking: tuple[str, str] | None = None
        super().__init__(*args, **kwargs)
        _TAKERS.add(self)

    def _close_clients(self) -> None:
        try:
            if self._lists or _ABANDONED or _UNDO:
                # What this channel may hold goes back now, not after the takers' TTL.
                self._abandon()
                with suppress(*self.connection_errors, redis.ResponseError):
                    self._restore_abandoned()
            super()._close_clients()
        finally:
            self.scripts.close()

    def recorded_by_script(self, delivery_tag: str) -> bool:
        if delivery_tag in self._recorded:
            self._recorded.discard(delivery_tag)
            return True
        return False

    def _create_client(self, asynchronous: bool = False) -> Any:
        # kombu makes a new redis.Redis for every command it sends outside the event
        # loop (each ack, task event and result a worker sends, each message a producer
        # sends), and redis-py fills a table of ~300 response callbacks for each one: a
        # large share of a busy worker's main process. The object only wraps
        # the channel's connection pool, which does the real work and is safe to share
        # between threads, so one per pool does the same; a channel that replaces its
        # pool (after a connection loss) gets a new client for the new pool.
        if asynchronous:
            return super()._create_client(asynchronous=True)
        pool = self.pool
        client = self._sync_client
        if client is None or client.connection_pool is not pool:
            client = self._sync_client = super()._create_client()
        return client

    @cached_property
    def subclient(self) -> Any:
        # kombu's, of the class that never waits for a message (fix 7): redis-py's own
        # pubsub() builds it (with the client's event dispatcher), then it is retyped.
        pubsub = self._create_client(asynchronous=True).pubsub()
        pubsub.__class__ = _ListenPubSub
        return pubsub

    @cached_property
    def gate(self) -> GateOptions:
        return GateOptions.from_option(self.apportion_gate)

    @cached_property
    def dead_letters(self) -> DeadLetters:
        return DeadLetters(self.client, self.gate.keys, self.gate.dead_letters)

    @contextmanager
    def _connection_info(self) -> Iterator[None]:
        """kombu detached the connection info (fix 1 above): build the pool from the
        info this channel was opened with. The worker's event loop is one thread."""
        transport = self.connection
        if transport is None or transport.client is not None:
            yield
            return
        transport.client = self._opened_with
        try:
            yield
        finally:
            transport.client = None

    def _connparams(self, asynchronous: bool = False) -> Any:
        with self._connection_info():
            return super()._connparams(asynchronous=asynchronous)

    def maybe_refresh_binding_expiry(self) -> None:
        if unreachable():
            return  # see _retry_refused; bindings outlive an outage by their TTL's slack
        # kombu retries it every second and logs each refusal with its traceback.
        try:
            super().maybe_refresh_binding_expiry()
        except redis.ResponseError as exc:
            if not refused(exc):
                raise
            log.debug("refreshing queue bindings: Redis refused (%s)", exc)

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

    # -- taking jobs (fixes 2, 3 and 5; the scripts above) --------------------------
    def _uses_kombus_take(self) -> bool:
        """Channels that are no worker's job channel take as kombu does: one that
        consumes a queue without acknowledgements (replies to control commands: nothing
        may be recorded for them), or whose keys carry a global prefix (the scripts do
        not prefix keys)."""
        return bool(
            self.global_keyprefix
            or not self.active_queues
            or not self._no_ack_queues.isdisjoint(self.active_queues)
        )

    def move_to_taking(self, sources: list[str]) -> tuple[str, str, bytes] | None:
        """Move the next waiting item of ``sources`` (queue lists, in priority order)
        into this channel's taking list: (queue list, taking list, item), or None.
        The first list is tried at once (where a busy single-queue worker finds its
        next job); the others are looked at only when it is empty."""
        source: str | None = sources[0]
        while source is not None:
            taking = self._taking(source)
            try:
                self._register(taking)
                item = self.scripts.call(self.pool, "LMOVE", source, taking, "RIGHT", "LEFT")
            except self.connection_errors:
                self._abandon()  # moved or not: the list goes back once reachable
                raise
            except redis.ResponseError as exc:
                if not refused(exc):
                    raise
                item = self._move_out_of_memory(source, taking)
            if item is not None:
                return source, taking, item
            if source != sources[0] or len(sources) == 1:
                return None
            first = self.scripts.run(self.pool, _FIRST, sources[1:], [])
            source = bytes_to_str(first) if first else None
        return None

    def _move_out_of_memory(self, source: str, taking: str) -> bytes | None:
        keys = [self.gate.keys.takers, source, taking]
        item: bytes | None = self.scripts.run(self.pool, _MOVE_OUT_OF_MEMORY, keys, [time()])
        if item is not None:
            self._lists.add(taking)  # the script registered it
        return item

    def _taking(self, source: str) -> str:
        return self.gate.keys.taking(self._token, source)

    def _abandon(self) -> None:
        """This token's taking lists may hold an item whose take was lost with its
        connection: later takes use a new token, and the old lists go back on their
        queues (:meth:`_restore_abandoned`; the takers' TTL is the backstop)."""
        _ABANDONED.extend(self._lists)
        self._lists = set()
        self._token = uuid.uuid4().hex
        self._alive_at = 0.0

    def _restore_abandoned(self) -> None:
        """Put back on their queues the taking lists this process gave up and the
        messages whose records it undoes (:data:`_UNDO`)."""
        while _ABANDONED:
            self.restore_taking(_ABANDONED[-1], forget=False)
            _ABANDONED.pop()
        while _UNDO:
            undo = _UNDO[-1]
            keys, args = list(undo.keys), [undo.tag, undo.stamp, undo.item]
            if self.scripts.run(self.pool, _UNDO_RECORD, keys, args):
                log.warning(
                    "message %s is back on queue %s, uncounted: its take delivered nothing",
                    undo.tag,
                    undo.keys[3],
                )
            _UNDO.pop()

    def restore_taking(self, taking: str, *, forget: bool) -> int:
        """Put taking list ``taking`` back on its queue (``forget``: and stop watching it)."""
        source = self.gate.keys.taking_source(taking)
        if source is None:
            return 0
        keys = [taking, source, self.gate.keys.takers]
        restored: int = self.scripts.run(self.pool, _RESTORE, keys, ["1" if forget else "0"])
        if restored:
            log.warning(
                "%d message(s) taken off queue %s by a connection that was lost are back "
                "on their queue",
                restored,
                source,
            )
        return restored

    def keep_taking(self) -> None:
        """Say this channel's taking lists are alive, and put back those of workers that
        stopped saying so (called by the transport's timer, from the event loop)."""
        ttl, now = self.gate.taker_ttl, time()
        if self._lists and now - self._alive_at >= ttl / 3:
            with self.conn_or_acquire() as client:
                client.zadd(self.gate.keys.takers, dict.fromkeys(self._lists, now))
            self._alive_at = now
        if _ABANDONED or _UNDO:
            self._restore_abandoned()
        if self._uses_kombus_take() or monotonic() - _REAPED_AT[0] < _REAP_SECONDS:
            return
        # Once a process, not once a channel (channels of connections Celery dropped live
        # on until collected), and one round trip for the lengths of every dead list: a
        # dead list stays watched for taker_forget and every reconnection leaves one a
        # queue, so a round trip a list and a channel would hold the event loop for
        # seconds behind a slow network, starving deliveries and acknowledgements.
        _REAPED_AT[0] = monotonic()
        with self.conn_or_acquire() as client:
            dead = client.zrangebyscore(
                self.gate.keys.takers, "-inf", now - ttl, start=0, num=100, withscores=True
            )
            if not dead:
                return
            pipe = client.pipeline(transaction=False)
            for name, _ in dead:
                pipe.llen(name)
            lengths = pipe.execute()
        for (name, seen), length in zip(dead, lengths, strict=True):
            forget = seen < now - self.gate.taker_forget
            if length or forget:
                self.restore_taking(bytes_to_str(name), forget=forget)

    def _register(self, taking: str) -> None:
        if taking not in self._lists:
            with self.conn_or_acquire() as client:
                client.zadd(self.gate.keys.takers, {taking: time()})
            self._lists.add(taking)

    def _take(self, source: str, taking: str, item: bytes) -> bool:
        """Settle one item moved off queue list ``source`` into ``taking`` through the
        gate, and deliver it. False when it was not delivered (dead-lettered, or no
        longer this worker's)."""
        queue = source.rsplit(self.sep, 1)[0]
        self._queue_cycle.rotate(queue)
        verdict = inspect(item, self.gate.rules)
        try:
            if isinstance(verdict, Bury):
                self._bury_taken(source, taking, item, verdict)
                return False
            if not self._settle(source, taking, item, verdict):
                return False
        except (*self.connection_errors, redis.ResponseError, StoreUnavailable) as exc:
            if isinstance(exc, redis.ResponseError) and not refused(exc):
                raise
            # The item is still in the taking list (or, if the transaction ran after all,
            # in ``unacked`` or the dead letters): never lost. The list goes back on its
            # queue as soon as Redis takes it.
            self._abandon()
            if isinstance(exc, redis.ResponseError) or (
                isinstance(exc, StoreUnavailable) and isinstance(exc.__cause__, redis.ResponseError)
            ):
                delay = self._refusing.failed()
                log.warning(
                    "a message from queue %s could not be recorded (%s); it goes back on "
                    "its queue, taking again in %.2f s",
                    queue,
                    exc,
                    delay,
                )
                return False
            if isinstance(exc, StoreUnavailable):  # kombu reconnects on its own errors
                raise redis.ConnectionError(str(exc)) from exc
            raise
        self._deliver_checked(verdict, queue, recorded=True)
        return True

    def _answered(self, verdict: Deliver) -> bool:
        """Whether the message's job was answered (its published marker is set): a
        worker that died after publishing, before acknowledging, did not die of the
        job, and the next delivery answers it again from the marker. Unknown (Redis
        did not say) counts as not answered: quarantined, as before."""
        kind = str(verdict.message["headers"]["task"]).removeprefix("apportion.")
        marker = self.gate.keys.published_marker(kind, answer_id(verdict))
        try:
            return bool(self.scripts.call(self.pool, "EXISTS", marker))
        except (*self.connection_errors, redis.ResponseError):
            return False

    def _settle(self, source: str, taking: str, item: bytes, verdict: Deliver) -> bool:
        """Record a taken item as unacknowledged and count its delivery, in one
        MULTI/EXEC; False when it is quarantined instead (dead-lettered)."""
        message = verdict.message
        props, headers = message["properties"], message["headers"]
        tag, info = props["delivery_tag"], props["delivery_info"]
        count = self.gate.keys.delivery_count(tag)
        # dumps([raw, exchange, routing_key]) as kombu's QoS.append writes it, with the
        # item byte for byte as it was queued.
        exchange, routing_key = dumps(info["exchange"]), dumps(info["routing_key"])
        record = b"".join((b"[", item, f", {exchange}, {routing_key}]".encode()))
        # The record's score in the unacked index names this take: what undoes the
        # record (_UNDO_RECORD) or replays it (_SETTLE_OUT_OF_MEMORY) checks it.
        stamp = time()
        undo = _Undo((self.unacked_index_key, self.unacked_key, count, source), tag, stamp, item)
        commands: list[tuple[Any, ...]] = [
            ("LLEN", taking),
            ("LTRIM", taking, 1, -1),
            ("LLEN", taking),
            ("HSET", self.unacked_key, tag, record),
            ("ZADD", self.unacked_index_key, stamp, tag),
            ("INCR", count),
            ("EXPIRE", count, self.gate.count_ttl),
        ]
        try:
            try:
                held, _, left, _, _, delivered, _ = self.scripts.transaction(self.pool, commands)
            except redis.ResponseError as exc:
                if not refused(exc):
                    raise
                keys = [taking, self.unacked_index_key, self.unacked_key, count]
                args = [stamp, tag, exchange, routing_key, self.gate.count_ttl]
                held, left, delivered = self.scripts.run(
                    self.pool, _SETTLE_OUT_OF_MEMORY, keys, args
                )
                if not held:  # nothing recorded: whoever put it back runs it
                    self._not_held(tag, source, left)
                    return False
        except self.connection_errors:
            # The reply is lost, not necessarily the record: if it ran, the message is
            # in ``unacked`` and counted for a delivery that never happened, and would
            # wait there for the visibility timeout. Undone once Redis is reached.
            _UNDO.append(undo)
            raise
        if left or not held:
            self._not_held(tag, source, left)
        if delivered <= self.gate.quarantine_after or self._answered(verdict):
            return True
        try:
            self.dead_letters.bury(
                item,
                queue=source,
                reason="quarantined",
                detail=f"handed to workers {delivered - 1} times without an answer, each "
                "time its worker died (raise APPORTION_QUARANTINE_AFTER to allow more)",
                tag=tag,
                task=headers["task"],
                task_id=headers["id"],
                unacked=(self.unacked_key, self.unacked_index_key),
            )
        except (*self.connection_errors, StoreUnavailable):
            # Refused (out of memory) or lost: the message would stay in ``unacked``
            # until the visibility timeout. Undone instead (nothing, if the burial ran):
            # back on its queue, taken again after the refusal's backoff and quarantined
            # as soon as Redis takes the write.
            _UNDO.append(undo)
            raise
        log.error("message %s from %s quarantined", headers["id"], source)
        return False

    def _not_held(self, tag: str, source: str, left: int) -> None:
        if left:
            # Items this channel did not read are in the list (a take retried after a
            # lost reply): the list is given up, and goes back on its queue.
            self._abandon()
            return
        # Put back on its queue meanwhile (this worker stalled past the takers' TTL):
        # it may run twice, which the once-per-job_id answer makes harmless.
        log.warning("message %s from %s was put back on its queue while taken", tag, source)

    def _bury(
        self, item: str | bytes, queue: str, verdict: Bury, taking: str | None = None
    ) -> None:
        """Dead-letter ``item`` with what the gate read of it (``taking``: and drop it
        from that taking list in the same step)."""
        self.dead_letters.bury(
            item,
            queue=queue,
            reason=verdict.reason,
            detail=verdict.detail,
            tag=verdict.tag,
            task=verdict.task,
            task_id=verdict.task_id,
            taking=taking,
        )

    def _bury_taken(self, source: str, taking: str, item: bytes, verdict: Bury) -> None:
        self._bury(item, source, verdict, taking)
        log.warning(
            "a message from queue %s was dead-lettered (%s): %s",
            source,
            verdict.reason,
            verdict.detail,
        )

    def _deliver_checked(self, verdict: Deliver, queue: str, *, recorded: bool) -> None:
        headers = verdict.message["headers"]
        if verdict.notes:
            log.warning("message %s from %s: %s", headers["id"], queue, "; ".join(verdict.notes))
        if verdict.verdict is not None:
            log.info(
                "message %s rejected at the gate: %s", headers["id"], verdict.verdict["message"]
            )
        tag = verdict.message["properties"]["delivery_tag"]
        if recorded:
            self._recorded.add(tag)
        if verdict.call is not None:
            self.gate_decoded = (tag, verdict.call)
        try:
            self.connection._deliver(verdict.message, queue)
        finally:
            self._recorded.discard(tag)
            self.gate_decoded = None

    def _gate_only(self, dest: str, item: str) -> None:
        """An item kombu's own BRPOP took (:meth:`_uses_kombus_take`): through the gate,
        then kombu records it as it does."""
        queue = dest.rsplit(self.sep, 1)[0]
        self._queue_cycle.rotate(queue)
        verdict = inspect(item, self.gate.rules)
        if isinstance(verdict, Deliver):
            self._deliver_checked(verdict, queue, recorded=False)
            return
        try:
            self._bury(item, dest, verdict)
        except (*self.connection_errors, StoreUnavailable) as exc:
            UNDELIVERED.keep(item, dest)  # off its queue, only here: fix 2
            if isinstance(exc, StoreUnavailable):  # kombu reconnects on its own errors
                raise redis.ConnectionError(str(exc)) from exc
            raise
        log.warning("a message from queue %s was dead-lettered (%s)", queue, verdict.reason)

    def _brpop_start(self, timeout: Any = None) -> Any:
        # Fix 3 above: move waiting items into the taking list and settle them, up to
        # what the prefetch allows; when every queue is empty, block in BLMOVE. Items
        # taken here are delivered now, like a blocking reply would be on the next loop
        # turn, and ``_in_poll`` stays unset so the next turn asks again.
        if self._uses_kombus_take():
            return super()._brpop_start(timeout)
        if self._refusing.waiting():
            return None  # the transport's timer ends the loop's wait within a second
        if self._blocking is not None:
            # A blocking take whose reply never came: kombu dropped its connection (no
            # reply in time), or it died. Its item, if any, is in its taking list.
            self._blocking = None
            self._abandon()
        try:
            if UNDELIVERED:
                UNDELIVERED.requeue(self)
            self._restore_abandoned()
            return self._take_waiting(timeout)
        except redis.ResponseError as exc:
            if not refused(exc):
                raise
            delay = self._refusing.failed()
            log.warning("Redis refused to hand out a message (%s); again in %.2f s", exc, delay)
            return None

    def _take_waiting(self, timeout: Any) -> None:
        budget = max(1, self.qos.prefetch_count or 1)
        buried = 0
        while budget > 0 and self.qos.can_consume():
            queues = self._queue_cycle.consume(len(self.active_queues))
            if not queues:
                return
            found = self.move_to_taking(
                [self._q_for_pri(q, pri) for pri in self.priority_steps for q in queues]
            )
            if found is None:
                self._hands_out_again()
                self._block(queues, timeout)
                return
            if self._take(*found):
                budget -= 1
            elif self._refusing.waiting():
                # Redis refused to record or dead-letter it: it goes back on its queue,
                # and the next take waits out the backoff (a move that works is no sign
                # that the write after it will).
                return
            else:
                buried += 1
                if buried >= _BURY_PER_TICK:
                    break
            self._hands_out_again()
            self.connection.wake_event_loop()  # fix 4

    def _hands_out_again(self) -> None:
        if self._refusing.succeeded():
            log.warning("Redis hands out messages again")

    def _block(self, queues: list[str], timeout: Any) -> None:
        """Wait in BLMOVE for the next item of the first of ``queues`` (its default
        priority's list). BLMOVE watches one list: a channel consuming several queues
        waits on each in turn for a short time, and every turn moves whatever waits on
        any of them first (:meth:`move_to_taking`), so a job waits at most that long."""
        wait = self.brpop_timeout if timeout is None else timeout
        if len(queues) > 1:
            wait = min(wait, _TURN_SECONDS)
            self._queue_cycle.rotate(queues[0])
        source = self._q_for_pri(queues[0], self.priority_steps[0])
        taking = self._taking(source)
        self._register(taking)
        self._in_poll = self.client.connection
        self._brpop_sent_at = monotonic()  # type: ignore[assignment]  # kombu's health check
        self._blocking = (source, taking)
        self.client.connection.send_command("BLMOVE", source, taking, "RIGHT", "LEFT", wait)

    def _brpop_read(self, **options: Any) -> Any:
        try:
            if self._blocking is None:
                return self._kombus_read(**options)
            source, taking = self._blocking
            try:
                item = self.client.parse_response(self.client.connection, "BLMOVE", **options)
            except self.connection_errors:
                # Reconnected on the next turn, which abandons this taking list.
                self.client.connection.disconnect()
                raise
            except redis.ResponseError as exc:
                self._blocking = None
                if not refused(exc):
                    raise
                delay = self._refusing.failed()
                log.warning("Redis refused to hand out a message (%s); again in %.2f s", exc, delay)
                return True
            self._blocking = None
            if item is None:
                raise Empty()
            self._take(source, taking, item)
            self.connection.wake_event_loop()
            return True
        finally:
            self._in_poll = None  # type: ignore[assignment]
            flush = getattr(self, "_flush_brpop_reauth", None)  # kombu >= 5.6
            if flush is not None:
                flush()

    def _kombus_read(self, **options: Any) -> Any:
        """kombu's BRPOP read (:meth:`_uses_kombus_take`), with each item through the gate
        (fix 5) unless its queue takes no acknowledgements."""
        try:
            dest__item = self.client.parse_response(self.client.connection, "BRPOP", **options)
        except self.connection_errors:
            # if there's a ConnectionError, disconnect so the next
            # iteration will reconnect automatically.
            self.client.connection.disconnect()
            raise
        if not dest__item:
            raise Empty()
        dest, item = bytes_to_str(dest__item[0]), bytes_to_str(dest__item[1])
        queue = dest.rsplit(self.sep, 1)[0]
        if queue in self._no_ack_queues:  # replies to control commands: kombu's way
            self._queue_cycle.rotate(queue)
            self.connection._deliver(loads(item), queue)
        else:
            self._gate_only(dest, item)
        self.connection.wake_event_loop()
        return True


def _retry_refused() -> None:
    if unreachable():
        # Every call here runs on the worker's event loop, which also fires the time
        # limits: with Redis unreachable each would wait out a reply timeout and hold
        # the loop for it. The reachability watch (its own thread) says when Redis
        # answers again; until then nothing here could succeed.
        return
    for qos in list(_REFUSING):
        try:
            qos.retry_refused()
        except Exception:  # a timer's error would end the worker: logged, tried again
            log.exception("retrying what Redis refused")
    for channel in list(_TAKERS):
        if channel.closed:  # its lists went back on close; the open channel reaps
            _TAKERS.discard(channel)
            continue
        try:
            channel.keep_taking()
        except (*channel.connection_errors, redis.ResponseError) as exc:
            # Redis unreachable or refusing: the consumer's own reconnection and backoff
            # deal with it; this is tried again on the next tick.
            log.debug("keeping taking lists alive: %s", exc)
        except Exception:
            log.exception("keeping taking lists alive")


class Transport(kombu_redis.Transport):
    Channel = Channel
    _wakeup: _Wakeup | None = None
    _retry_timer: Any = None

    def register_with_event_loop(self, connection: Any, loop: Any) -> None:
        super().register_with_event_loop(connection, loop)
        # Called again with the same loop after every reconnection: one wake-up a loop.
        old = self._wakeup
        if old is not None:
            loop.remove_reader(old.fileno())
            old.close()
        wakeup = self._wakeup = _Wakeup()
        loop.add_reader(wakeup.fileno(), wakeup.drain)
        if self._retry_timer is not None:
            self._retry_timer.cancel()
        # Deliveries Redis refused to end are tried again from here; it also ends the
        # loop's wait while the channel holds back after a refusal (_brpop_start).
        self._retry_timer = loop.call_repeatedly(1.0, _retry_refused)

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


class SentinelChannel(Channel, kombu_redis.SentinelChannel):
    """The fixed channel on kombu's Sentinel channel: each connection asks the sentinels
    where the master is, and every fix above applies unchanged."""

    from_transport_options = (  # type: ignore[assignment]
        *kombu_redis.SentinelChannel.from_transport_options,
        "apportion_gate",
    )

    def _sentinel_managed_pool(self, asynchronous: bool = False) -> Any:
        # It reads the connection info (the list of sentinels) too: fix 1.
        with self._connection_info():
            return super()._sentinel_managed_pool(asynchronous)


# How long a reconnection keeps asking the sentinels for a reachable master before
# handing the failure to Celery. A failover takes the sentinels' down-after-milliseconds
# plus an election (seconds); Celery's own reconnection waits 2, 4, 6 … s between
# attempts, so a worker whose first attempt came a moment too early lost those seconds
# on top. Short polls here reconnect within a fraction of a second of the promotion.
# Only once this process has had a master: a producer that cannot reach one at all
# (``apportion submit``) is told so at once.
FAILOVER_WAIT_SECONDS = 15.0
FAILOVER_POLL_SECONDS = 0.25


class SentinelTransport(Transport, kombu_redis.SentinelTransport):
    Channel = SentinelChannel
    default_port = 26379
    _had_master = False  # in this process, ever

    def establish_connection(self) -> Any:
        deadline = monotonic() + (FAILOVER_WAIT_SECONDS if SentinelTransport._had_master else 0)
        while True:
            try:
                connection = super().establish_connection()
            except self.connection_errors as exc:
                if monotonic() >= deadline:
                    raise
                log.info("no reachable Redis master yet (%s); asking the sentinels again", exc)
                sleep(FAILOVER_POLL_SECONDS)
                continue
            SentinelTransport._had_master = True
            return connection
