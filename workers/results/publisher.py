"""Publishing result events on Redis Streams, exactly once per job.

A job can run twice: acks_late redelivers it when a worker dies after publishing
but before acknowledging. Subscribers must still see one event per job, so the
"already published?" check and the XADD happen in one Lua script — atomic on the
server, no window between them.

The job's marker (``{prefix}:published:{kind}:{job_id}``) holds ``<fingerprint>
<entry id>``: the fingerprint of the job that was answered (tasks/jobs.py computes it
from the job's content) and where its event is. A second publication of the same
job_id is told which, so the task can answer a redelivered or resubmitted job with
the very envelope the stream holds (one truth) and a *different* job reusing the
job_id with ``rejected``/``duplicate_job_id`` (the stream keeps its one event).

Streams are trimmed by count (``MAXLEN ~``) and by age (``MINID ~``, entries older
than ``APPORTION_STREAM_MAX_AGE``) on every publication; the count never below what a
consumer group has not read yet (workers/redis/trim.py).

The same script can store the task's result in Celery's Redis result backend (a
:class:`ResultRecord`: the key, the value Celery's backend would write, its expiry),
written and announced on the key's channel exactly as Celery's backend does it, when
the event goes out: the job's answer reaches the stream and the backend in the one
round trip, instead of three (tasks/jobs.py).

One copy of a big envelope: an envelope of more than :data:`INLINE_MAX_BYTES` of JSON
stored with its result record is kept once, in the record. Its stream entry carries
``envelope_key`` (the record's key, a Celery result whose ``result`` is the envelope)
in place of ``envelope`` (docs/contract.md, "Waiting for the answer"); the record is
then kept at least as long as the stream keeps its entries. A waiting caller gets the
envelope in the record's PUBLISH, as before, and Redis holds, receives and copies the
body once instead of twice. A smaller envelope is on both, as the record is when the
task cannot write it with the event.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
import redis
from redis.backoff import NoBackoff
from redis.connection import ConnectionInterface
from redis.retry import Retry

from apportion.codec import encode_text
from apportion.contracts import Envelope
from apportion.errors import StoreUnavailable
from apportion.workers.redis.client import REDIS_ERRORS, is_outage
from apportion.workers.redis.keys import Keys, min_stream_id
from apportion.workers.redis.trim import TRIM_LUA, trimmed_ttl

# KEYS: marker, stream, trimmed-unread counter[, result key]. ARGV: ttl, maxlen, minid,
# fingerprint, result expiry, result value, counter ttl, fields... (the result ones
# empty without a result key). Returns {1, entry id} when published now, {0, marker
# value} when the job_id was known.
_PUBLISH_ONCE = (
    TRIM_LUA
    + """
local known = redis.call('GET', KEYS[1])
if known then
  return {0, known}
end
local id = redis.call('XADD', KEYS[2], '*', unpack(ARGV, 8))
trim(KEYS[2], ARGV[2], ARGV[3], KEYS[3], ARGV[7])
redis.call('SET', KEYS[1], ARGV[4] .. ' ' .. id, 'EX', ARGV[1])
if KEYS[4] then
  redis.call('SET', KEYS[4], ARGV[6], 'EX', ARGV[5])
  redis.call('PUBLISH', KEYS[4], ARGV[6])
end
return {1, id}
"""
)
_PUBLISH_ONCE_SHA = hashlib.sha1(_PUBLISH_ONCE.encode()).hexdigest()


# Envelopes larger than this (JSON bytes) are kept once, in their result record (module
# doc): at this size an envelope's second copy costs Redis more than a reader's GET.
INLINE_MAX_BYTES = 64 * 1024
# The stream entry's field naming the result record that holds its envelope.
ENVELOPE_KEY = "envelope_key"


def event_fields(
    envelope: Envelope, text: str | bytes | None = None, envelope_key: str | None = None
) -> dict[str, Any]:
    """The stream entry: flat fields for filtering plus the whole envelope as JSON, or
    with ``envelope_key`` the key of the result record that holds it."""
    fields: dict[str, Any] = {
        "job_id": envelope.job_id or "",
        "kind": envelope.kind,
        "status": envelope.status,
    }
    if envelope_key is not None:
        fields[ENVELOPE_KEY] = envelope_key
    else:
        fields["envelope"] = encode_text(envelope.as_dict()) if text is None else text
    return fields


def recorded_envelope(stored: bytes | str | None) -> dict[str, Any] | None:
    """The envelope in a result record's JSON (None: no record, or not a SUCCESS)."""
    if stored is None:
        return None
    meta = orjson.loads(stored)
    if not isinstance(meta, dict) or meta.get("status") != "SUCCESS":
        return None
    envelope: dict[str, Any] = meta["result"]
    return envelope


@dataclass(frozen=True, slots=True)
class ResultRecord:
    """A task result to store with the event (module doc): Celery's key, value, expiry."""

    key: str
    value: bytes
    ttl: int


@dataclass(frozen=True, slots=True)
class Publication:
    """What publishing did. ``new``: the event went out now (with the
    :class:`ResultRecord`, if one was given: ``recorded``). Otherwise the job_id had an
    event already, at ``entry_id``, for a job of the same content (``same_content``)
    or a different one. ``entry_id`` is empty when the marker predates fingerprints."""

    new: bool
    entry_id: str
    same_content: bool = True
    recorded: bool = False


def _publication(reply: Any, fingerprint: str, recorded: bool = False) -> Publication:
    flag, value = reply
    text = value.decode() if isinstance(value, bytes) else str(value)
    if int(flag) == 1:
        return Publication(new=True, entry_id=text, recorded=recorded)
    known, _, entry = text.partition(" ")
    if not entry:  # a marker written before fingerprints: the entry id alone (or "1")
        return Publication(new=False, entry_id=known if "-" in known else "")
    return Publication(new=False, entry_id=entry, same_content=known == fingerprint)


class ResultPublisher(Protocol):
    def publish(self, envelope: Envelope) -> str | None:
        """Publish the envelope's event; return the entry id, or None if already published."""

    def publish_once(
        self,
        envelope: Envelope,
        fingerprint: str,
        text: str | bytes | None = None,
        record: ResultRecord | None = None,
    ) -> Publication:
        """Publish unless the job_id has an event; ``text``: the envelope's JSON, if made;
        ``record``: store it too, if this publisher can (``recorded`` says whether)."""

    def published_envelope(self, kind: str, entry_id: str) -> dict[str, Any] | None:
        """The envelope of the event at ``entry_id`` (None once trimmed away)."""


class _Publisher:
    def publish_once(
        self,
        envelope: Envelope,
        fingerprint: str,
        text: str | bytes | None = None,
        record: ResultRecord | None = None,
    ) -> Publication:
        raise NotImplementedError

    def publish(self, envelope: Envelope) -> str | None:
        """Publish the envelope's event; return the entry id, or None if already published."""
        done = self.publish_once(envelope, "")
        return done.entry_id if done.new else None


class StreamPublisher(_Publisher):
    """Publishes result envelopes to ``{prefix}:results:{kind}`` streams (trimmed by
    count and age).

    The event is the one Redis command a job adds to Celery's own, so it takes the
    shortest path redis-py offers: a connection of the publisher's own (one per
    process, made from the client's pool settings: address, timeouts, health checks;
    the client's retry policy) driven with ``send_command``/``read_response``. The client's
    ``execute_command`` adds a pool checkout with a non-blocking read to test the
    connection, observability hooks and response callbacks around the same bytes on
    the wire, work a busy worker would otherwise pay for on every event.
    """

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        maxlen: int,
        dedup_ttl: int,
        max_age_seconds: int = 86_400,
    ) -> None:
        self._client = client
        self._pool = client.connection_pool
        # The client's own retry policy (workers/redis/client.py), none if it has none.
        self._retry = client.get_retry() or Retry(NoBackoff(), 0)
        self._keys = keys
        self._maxlen = maxlen
        self._dedup_ttl = dedup_ttl
        self._max_age = max_age_seconds
        self._connection: ConnectionInterface | None = None
        self._pid = 0
        # Thread pools share one publisher: one command on the connection at a time.
        self._lock = threading.Lock()

    def publish_once(
        self,
        envelope: Envelope,
        fingerprint: str,
        text: str | bytes | None = None,
        record: ResultRecord | None = None,
    ) -> Publication:
        if not envelope.job_id:
            raise ValueError("an envelope needs a job_id to be published idempotently")
        kind = envelope.kind
        marker = self._keys.published_marker(kind, envelope.job_id)
        stream = self._keys.results_stream(kind)
        counter = self._keys.trimmed_unread(stream)
        keys = (
            [marker, stream, counter] if record is None else [marker, stream, counter, record.key]
        )
        record_ttl: Any = ""
        held_by_record = None
        if record is not None:
            record_ttl = record.ttl
            if text is not None and len(text) > INLINE_MAX_BYTES:
                held_by_record = record.key
                # The entry refers to the record: it lives as long as the entry may.
                record_ttl = max(record.ttl, self._max_age)
        args: list[Any] = [
            len(keys),
            *keys,
            self._dedup_ttl,
            self._maxlen,
            min_stream_id(self._max_age),
            fingerprint,
            record_ttl,
            "" if record is None else record.value,
            trimmed_ttl(self._max_age),
        ]
        for k, v in event_fields(envelope, text, held_by_record).items():
            args += [k, v]
        try:
            with self._lock:
                conn = self._connect()
                reply = self._retry.call_with_retry(
                    lambda: self._publish_once(conn, args), lambda _error: conn.disconnect()
                )
        except REDIS_ERRORS as exc:
            if not is_outage(exc):
                raise
            raise StoreUnavailable(f"could not publish result of {envelope.job_id}: {exc}") from exc
        return _publication(reply, fingerprint, recorded=record is not None)

    def published_envelope(self, kind: str, entry_id: str) -> dict[str, Any] | None:
        try:
            found: Any = self._client.xrange(self._keys.results_stream(kind), entry_id, entry_id)
        except REDIS_ERRORS as exc:
            if not is_outage(exc):
                raise
            raise StoreUnavailable(f"could not read result event {entry_id}: {exc}") from exc
        if not found:
            return None
        fields = found[0][1]
        key = fields.get(ENVELOPE_KEY.encode())
        if key is None:
            envelope: dict[str, Any] = json.loads(fields[b"envelope"])
            return envelope
        try:
            return recorded_envelope(self._client.get(key))
        except REDIS_ERRORS as exc:
            if not is_outage(exc):
                raise
            raise StoreUnavailable(f"could not read result record {key!r}: {exc}") from exc

    def _connect(self) -> ConnectionInterface:
        pid = os.getpid()
        conn = self._connection
        if conn is None or self._pid != pid:
            # A forked child must not use (nor close) the socket it inherited: it is the
            # parent's. It gets a connection of its own on first use.
            conn = self._connection = self._pool.make_connection()
            self._pid = pid
        # Connecting (with the connection's own retries) before the command's retry
        # loop, as the client's pool checkout does, so an unreachable Redis costs one
        # round of reconnect backoff, not one round per command attempt.
        conn.connect()
        return conn

    def _publish_once(self, conn: ConnectionInterface, args: list[Any]) -> Any:
        # A no-op while connected. After a failure, reconnecting here rather than inside
        # send_command matters behind Sentinel: only connect() asks the sentinels where
        # the master is now, send_command reconnects to the address it had.
        conn.connect()
        try:
            try:
                return self._command(conn, "EVALSHA", _PUBLISH_ONCE_SHA, *args)
            except redis.exceptions.NoScriptError:
                # First use on this server, or it restarted or flushed its scripts.
                self._command(conn, "SCRIPT", "LOAD", _PUBLISH_ONCE)
                return self._command(conn, "EVALSHA", _PUBLISH_ONCE_SHA, *args)
        except redis.exceptions.ResponseError:
            raise  # a complete reply: the connection is in step
        except BaseException:
            # Anything else between sending and reading (a soft time limit, a dropped
            # socket) may leave a reply in flight; a fresh connection cannot misread it.
            conn.disconnect()
            raise

    @staticmethod
    def _command(conn: ConnectionInterface, *args: Any) -> Any:
        conn.send_command(*args)
        return conn.read_response()


@dataclass
class MemoryPublisher(_Publisher):
    """In-process stand-in with the same once-per-job rule (the embedded demo uses it)."""

    events: list[dict[str, Any]] = field(default_factory=list)
    _seen: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def publish_once(
        self,
        envelope: Envelope,
        fingerprint: str,
        text: str | bytes | None = None,
        record: ResultRecord | None = None,
    ) -> Publication:
        """As :class:`StreamPublisher`'s; never stores a ``record`` (no Redis here)."""
        key = (envelope.kind, envelope.job_id or "")
        with self._lock:
            known = self._seen.get(key)
            if known is not None:
                return Publication(False, known[1], same_content=known[0] == fingerprint)
            if isinstance(text, bytes):  # events are shown as JSON (apportion demo --json)
                text = text.decode("utf-8")
            self.events.append(event_fields(envelope, text))
            entry = f"{len(self.events)}-0"
            self._seen[key] = (fingerprint, entry)
            return Publication(True, entry)

    def published_envelope(self, kind: str, entry_id: str) -> dict[str, Any] | None:
        index = int(entry_id.split("-")[0]) - 1
        with self._lock:
            if 0 <= index < len(self.events):
                envelope: dict[str, Any] = json.loads(self.events[index]["envelope"])
                return envelope
        return None

    def envelopes(self) -> list[Envelope]:
        return [Envelope.from_dict(json.loads(e["envelope"])) for e in self.events]
