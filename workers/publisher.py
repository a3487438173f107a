"""Publishing result events on Redis Streams, exactly once per job.

A job can run twice: acks_late redelivers it when a worker dies after publishing
but before acknowledging. Subscribers must still see one event per job, so the
"already published?" check and the XADD happen in one Lua script — atomic on the
server, no window between them.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Protocol

import redis

from apportion.contracts import Envelope, Kind
from apportion.errors import StoreUnavailable
from workers.keys import Keys
from workers.redis_client import TRANSIENT_ERRORS

_PUBLISH_ONCE = """
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  local id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 3))
  redis.call('SET', KEYS[1], id, 'EX', ARGV[1])
  return id
end
return false
"""


def event_fields(envelope: Envelope) -> dict[str, str]:
    """The stream entry: flat fields for filtering plus the whole envelope as JSON."""
    return {
        "job_id": envelope.job_id or "",
        "kind": envelope.kind,
        "status": envelope.status,
        "envelope": envelope.model_dump_json(),
    }


class ResultPublisher(Protocol):
    def publish(self, envelope: Envelope) -> str | None:
        """Publish the envelope's event; return the entry id, or None if already published."""


class StreamPublisher:
    """Publishes result envelopes to ``{prefix}:results:{kind}`` streams (MAXLEN ~ capped)."""

    def __init__(self, client: redis.Redis, keys: Keys, *, maxlen: int, dedup_ttl: int) -> None:
        self._client = client
        self._keys = keys
        self._maxlen = maxlen
        self._dedup_ttl = dedup_ttl
        self._script = client.register_script(_PUBLISH_ONCE)

    def publish(self, envelope: Envelope) -> str | None:
        if not envelope.job_id:
            raise ValueError("an envelope needs a job_id to be published idempotently")
        kind: Kind = envelope.kind
        flat: list[str] = []
        for k, v in event_fields(envelope).items():
            flat += [k, v]
        try:
            entry = self._script(
                keys=[
                    self._keys.published_marker(kind, envelope.job_id),
                    self._keys.results_stream(kind),
                ],
                args=[self._dedup_ttl, self._maxlen, *flat],
            )
        except TRANSIENT_ERRORS as exc:
            raise StoreUnavailable(f"could not publish result of {envelope.job_id}: {exc}") from exc
        if entry is None:
            return None
        return entry.decode() if isinstance(entry, bytes) else str(entry)


@dataclass
class MemoryPublisher:
    """In-process stand-in with the same once-per-job rule (the embedded demo uses it)."""

    events: list[dict[str, str]] = field(default_factory=list)
    _seen: set[tuple[str, str]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def publish(self, envelope: Envelope) -> str | None:
        key = (envelope.kind, envelope.job_id or "")
        with self._lock:
            if key in self._seen:
                return None
            self._seen.add(key)
            self.events.append(event_fields(envelope))
            return f"{len(self.events)}-0"

    def envelopes(self) -> list[Envelope]:
        return [Envelope.model_validate(json.loads(e["envelope"])) for e in self.events]
