"""The failure-history store: launch failures per account over a sliding window.

One sorted set per account (``{prefix}:failures:{account}``) holds failure event
ids scored by the failure time. Recording is one Lua script, atomic on the server:

1. ``SET NX`` the event-id marker — a repeated event id changes nothing;
2. for a failure: ``XADD`` it to the launch-failures stream (trimmed by count and
   age); unless it is older than the retention period (it would be dropped at once:
   the answer says so, ``recorded: false`` with ``skipped: outside_retention``),
   ``ZADD`` it to the account's set, drop entries older than the retention period and
   beyond the newest ``APPORTION_FAILURE_HISTORY_MAX_PER_ACCOUNT`` (the set of an
   account that fails without end stays bounded; the penalty saturates long before),
   and ``EXPIRE`` the set after it — so old entries age out by themselves and an
   account that stops failing leaves no key behind.

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

_RECORD = """
-- KEYS: marker, history, stream
-- ARGV: ttl, at, event_id, oldest, maxlen, outcome, minid, cap, fields...
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  return -1
end
if ARGV[6] ~= 'failed' then
  return 0
end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', unpack(ARGV, 9))
redis.call('XTRIM', KEYS[3], 'MINID', '~', ARGV[7])
if tonumber(ARGV[2]) < tonumber(ARGV[4]) then
  return 2
end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[4])
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[8]) + 1))
redis.call('EXPIRE', KEYS[2], ARGV[1])
return 1
"""

OUTSIDE_RETENTION = "outside_retention"


@dataclass(frozen=True, slots=True)
class Recorded:
    """What recording an outcome did: ``recorded`` is False for a repeated event id, and
    for a failure older than the retention period (``outside_retention``)."""

    recorded: bool
    failure: bool
    outside_retention: bool = False


class FailureHistory(Protocol):
    def record(self, event: LaunchOutcomeJob, now: datetime) -> Recorded: ...

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
    ) -> None:
        self._client = client
        self._keys = keys
        self.retention_seconds = retention_seconds
        self._maxlen = stream_maxlen
        self._max_age = stream_max_age
        self._cap = max_per_account
        self._script = client.register_script(_RECORD)

    def record(self, event: LaunchOutcomeJob, now: datetime) -> Recorded:
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
            code = self._script(
                keys=[
                    self._keys.failure_event_marker(event.event_id),
                    self._keys.failure_history(event.account),
                    self._keys.launch_failures_stream,
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
                    *flat,
                ],
            )
        except REDIS_ERRORS as exc:
            if not is_outage(exc):
                raise
            raise StoreUnavailable(f"could not record {event.event_id}: {exc}") from exc
        return Recorded(
            recorded=code in (0, 1), failure=event.outcome == "failed", outside_retention=code == 2
        )

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
    _seen: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, event: LaunchOutcomeJob, now: datetime) -> Recorded:
        with self._lock:
            if event.event_id in self._seen:
                return Recorded(recorded=False, failure=event.outcome == "failed")
            self._seen.add(event.event_id)
            if event.outcome == "failed":
                oldest = now.timestamp() - self.retention_seconds
                at = (event.at or now).timestamp()
                if at >= oldest:
                    kept = [e for e in self.failures.get(event.account, []) if e[0] >= oldest]
                    newest = sorted([*kept, (at, event.event_id)])[-self.max_per_account :]
                    self.failures[event.account] = newest
                self.stream.append(
                    {
                        "event_id": event.event_id,
                        "account": event.account,
                        "reason": event.reason or "",
                    }
                )
            if event.outcome == "failed" and at < oldest:
                return Recorded(recorded=False, failure=True, outside_retention=True)
            return Recorded(recorded=True, failure=event.outcome == "failed")

    def counts(
        self, accounts: Sequence[str], window_hours: float, now: datetime
    ) -> Mapping[str, int]:
        since = now.timestamp() - min(window_hours * 3600.0, float(self.retention_seconds))
        with self._lock:
            return {
                a: sum(1 for at, _ in self.failures.get(a, []) if at >= since)
                for a in dict.fromkeys(accounts)
            }
