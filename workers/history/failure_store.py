"""The failure-history store: launch failures per account over a sliding window.

One sorted set per account (``{prefix}:failures:{account}``) holds failure event
ids scored by the failure time. Recording is one Lua script, atomic on the server,
keyed by the event id's marker (``{prefix}:outcome:{event_id}``):

1. a marker already there decides without changing anything: it holds the content
   digest of the send that recorded the event (tasks/jobs.py computes it, the same
   digest the result publisher keeps) and what recording did. A send of the same
   content gets that same answer; a send of other content is a ``duplicate`` (the task
   answers it ``rejected``/``duplicate_job_id`` and publishes nothing: the result event
   of the event id belongs to the content the history holds). A marker without a
   digest (the launcher's own records) answers ``recorded: false``;
2. for a failure: ``XADD`` it to the launch-failures stream (trimmed by count and
   age, never by count below what a consumer group has not read:
   workers/redis/trim.py); unless it is older than the retention period (it would be
   dropped at once: the answer says so, ``recorded: false`` with ``skipped: outside_retention``),
   ``ZADD`` it to the account's set, drop entries older than the retention period and
   beyond the newest ``APPORTION_FAILURE_HISTORY_MAX_PER_ACCOUNT`` (the set of an
   account that fails without end stays bounded; the penalty saturates long before),
   and ``EXPIRE`` the set after it — so old entries age out by themselves and an
   account that stops failing leaves no key behind;
3. ``SET`` the marker (digest and answer) for at least as long as the retention period
   and the result publisher's ``APPORTION_DEDUP_TTL``: while an event id's result event
   can be found by its job_id, the same content is answered from the marker too, so the
   history and the published answer are decided by one send, never by two.

Events dated in the future are refused by the engine (apportion/outcome.py) before
they reach the store: beyond ``APPORTION_LIMITS__MAX_EVENT_SKEW_SECONDS`` ahead of
the worker's clock an event would count in every window until its date.

Counting is ``ZCOUNT`` over ``[now − window, +inf)`` per account, pipelined.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import redis

from apportion.contracts.events import LaunchOutcomeJob
from apportion.errors import StoreUnavailable
from apportion.workers.redis.client import REDIS_ERRORS, is_outage
from apportion.workers.redis.keys import Keys, min_stream_id
from apportion.workers.redis.trim import TRIM_LUA, trimmed_ttl

_RECORD = (
    TRIM_LUA
    + """
-- KEYS: marker, history, stream, trimmed-unread counter
-- ARGV: ttl, at, event_id, oldest, maxlen, outcome, minid, cap, digest, marker ttl,
--       counter ttl, fields...
-- Returns {code, ''} when recorded now (0: a success, 1: a failure in the history,
-- 2: a failure outside the retention period), {-1, marker} when the marker was there.
local known = redis.call('GET', KEYS[1])
if known then
  return {-1, known}
end
local code = 0
if ARGV[6] == 'failed' then
  redis.call('XADD', KEYS[3], '*', unpack(ARGV, 12))
  trim(KEYS[3], ARGV[5], ARGV[7], KEYS[4], ARGV[11])
  if tonumber(ARGV[2]) < tonumber(ARGV[4]) then
    code = 2
  else
    redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[4])
    redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[8]) + 1))
    redis.call('EXPIRE', KEYS[2], ARGV[1])
    code = 1
  end
end
redis.call('SET', KEYS[1], ARGV[9] .. ' ' .. code, 'EX', ARGV[10])
return {code, ''}
"""
)

OUTSIDE_RETENTION = "outside_retention"
# What the engine is told of a send that lost its event id to other content.
DUPLICATE = "duplicate_job_id"


@dataclass(frozen=True, slots=True)
class Recorded:
    """What recording an outcome did: ``recorded`` is False for a repeated event id, and
    for a failure older than the retention period (``outside_retention``)."""

    recorded: bool
    failure: bool
    outside_retention: bool = False
    # The event id was recorded for a send of other content (see the module doc).
    duplicate: bool = False


def _answer(code: int, failure: bool) -> Recorded:
    return Recorded(recorded=code in (0, 1), failure=failure, outside_retention=code == 2)


def _known(marker: str, digest: str | None, failure: bool) -> Recorded:
    """The answer to a send whose event id has a marker already (module doc, step 1)."""
    known, space, code = marker.rpartition(" ")
    if not space or not known or not digest or not code.isdigit():
        # A marker without a digest (the launcher's records, or written by an earlier
        # version), or a send without one: recorded before, by someone else.
        return Recorded(recorded=False, failure=failure)
    if known != digest:
        return Recorded(recorded=False, failure=failure, duplicate=True)
    return _answer(int(code), failure)


class FailureHistory(Protocol):
    def record(self, event: LaunchOutcomeJob, now: datetime, digest: str | None = None) -> Recorded:
        """Record ``event`` once per event id; ``digest``: the content digest of the send
        (``answers.fingerprint`` of the job as sent), None for the launcher's own."""

    ...

    def counts(
        self, accounts: Sequence[str], window_hours: float, now: datetime
    ) -> Mapping[str, int]: ...


class FailureStore:
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        retention_seconds: int,
        stream_maxlen: int,
        stream_max_age: int = 86_400,
        max_per_account: int = 10_000,
        dedup_ttl: int = 86_400,
    ) -> None:
        self._client = client
        self._marker_ttl = max(retention_seconds, dedup_ttl)
        self._keys = keys
        self.retention_seconds = retention_seconds
        self._maxlen = stream_maxlen
        self._max_age = stream_max_age
        self._cap = max_per_account
        self._script = client.register_script(_RECORD)

    def record(self, event: LaunchOutcomeJob, now: datetime, digest: str | None = None) -> Recorded:
        when = event.at or now  # an event without a time happened now
        at = when.timestamp()
        oldest = now.timestamp() - self.retention_seconds
        fields = {
            "event_id": event.event_id,
            "account": event.account,
            "outcome": event.outcome,
            "at": when.isoformat(),
            "job_id": event.job_id or "",
            "reason": event.reason or "",
        }
        flat: list[str] = []
        for k, v in fields.items():
            flat += [k, v]
        try:
            reply = self._script(
                keys=[
                    self._keys.failure_event_marker(event.event_id),
                    self._keys.failure_history(event.account),
                    self._keys.launch_failures_stream,
                    self._keys.trimmed_unread(self._keys.launch_failures_stream),
                ],
                args=[
                    self.retention_seconds,
                    at,
                    event.event_id,
                    oldest,
                    self._maxlen,
                    event.outcome,
                    min_stream_id(self._max_age),
                    self._cap,
                    digest or "",
                    self._marker_ttl,
                    trimmed_ttl(self._max_age),
                    *flat,
                ],
            )
        except REDIS_ERRORS as exc:
            if not is_outage(exc):
                raise
            raise StoreUnavailable(f"could not record {event.event_id}: {exc}") from exc
        failure = event.outcome == "failed"
        code, marker = int(reply[0]), reply[1]
        if code < 0:
            text = marker.decode() if isinstance(marker, bytes) else str(marker)
            return _known(text, digest, failure)
        return _answer(code, failure)

    def counts(
        self, accounts: Sequence[str], window_hours: float, now: datetime
    ) -> Mapping[str, int]:
        """Failures per account in ``[now − window, now]`` (future-dated ones count too)."""
        window = min(window_hours * 3600.0, float(self.retention_seconds))
        since = now.timestamp() - window
        unique = list(dict.fromkeys(accounts))
        try:
            pipe = self._client.pipeline(transaction=False)
            for account in unique:
                pipe.zcount(self._keys.failure_history(account), since, "+inf")
            values = pipe.execute()
        except REDIS_ERRORS as exc:
            if not is_outage(exc):
                raise
            raise StoreUnavailable(f"could not read failure history: {exc}") from exc
        return {a: int(v) for a, v in zip(unique, values, strict=True)}


@dataclass
class MemoryFailureStore:
    """In-process stand-in with the same rules (the embedded demo uses it)."""

    retention_seconds: int = 24 * 3600
    max_per_account: int = 10_000
    failures: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    stream: list[dict[str, str]] = field(default_factory=list)
    _seen: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, event: LaunchOutcomeJob, now: datetime, digest: str | None = None) -> Recorded:
        with self._lock:
            known = self._seen.get(event.event_id)
            if known is not None:
                return _known(known, digest, event.outcome == "failed")
            done = self._record(event, now)
            code = 2 if done.outside_retention else 1 if done.failure else 0
            self._seen[event.event_id] = f"{digest or ''} {code}"
            return done

    def _record(self, event: LaunchOutcomeJob, now: datetime) -> Recorded:
        if event.outcome != "failed":
            return Recorded(recorded=True, failure=False)
        self.stream.append(
            {"event_id": event.event_id, "account": event.account, "reason": event.reason or ""}
        )
        oldest = now.timestamp() - self.retention_seconds
        at = (event.at or now).timestamp()
        if at < oldest:
            return Recorded(recorded=False, failure=True, outside_retention=True)
        kept = [e for e in self.failures.get(event.account, []) if e[0] >= oldest]
        self.failures[event.account] = sorted([*kept, (at, event.event_id)])[
            -self.max_per_account :
        ]
        return Recorded(recorded=True, failure=True)

    def counts(
        self, accounts: Sequence[str], window_hours: float, now: datetime
    ) -> Mapping[str, int]:
        since = now.timestamp() - min(window_hours * 3600.0, float(self.retention_seconds))
        with self._lock:
            return {
                a: sum(1 for at, _ in self.failures.get(a, []) if at >= since)
                for a in dict.fromkeys(accounts)
            }
