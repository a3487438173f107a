"""Following the result streams with a consumer group (``apportion events``).

A subscriber that crashes resumes where it stopped: entries it had read but not
acknowledged stay in its pending list and are read again first (reading from id
``0``), and entries left pending by a consumer that never came back are claimed
with XAUTOCLAIM once idle for ``claim_idle_ms``. Acknowledge after processing and
nothing is missed; entries carry job_id so a consumer can also deduplicate.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from apportion.errors import StoreUnavailable
from workers.keys import SUBSCRIBER_GROUP
from workers.redis_client import TRANSIENT_ERRORS


@dataclass(frozen=True, slots=True)
class StreamEvent:
    stream: str
    entry_id: str
    fields: dict[str, str]

    @property
    def job_id(self) -> str:
        return self.fields.get("job_id", "")

    @property
    def kind(self) -> str:
        return self.fields.get("kind", "")

    @property
    def status(self) -> str:
        return self.fields.get("status", "")

    def envelope(self) -> dict[str, Any]:
        payload: dict[str, Any] = json.loads(self.fields.get("envelope", "{}"))
        return payload


def default_consumer_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class StreamSubscriber:
    def __init__(
        self,
        client: redis.Redis,
        streams: Sequence[str],
        *,
        group: str = SUBSCRIBER_GROUP,
        consumer: str | None = None,
        start: str = "0",
        claim_idle_ms: int = 60_000,
    ) -> None:
        self._client = client
        self._streams = list(streams)
        self.group = group
        self.consumer = consumer or default_consumer_name()
        self._start = start
        self._claim_idle_ms = claim_idle_ms
        self._backlog_done = False

    def ensure_groups(self) -> None:
        for stream in self._streams:
            try:
                self._client.xgroup_create(stream, self.group, id=self._start, mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
            except TRANSIENT_ERRORS as exc:
                raise StoreUnavailable(str(exc)) from exc

    def _entries(self, stream: str, rows: Any) -> list[StreamEvent]:
        out = []
        for entry_id, raw in rows or []:
            if raw is None:  # deleted by MAXLEN trimming while pending
                continue
            out.append(
                StreamEvent(
                    stream=stream,
                    entry_id=_text(entry_id),
                    fields={_text(k): _text(v) for k, v in raw.items()},
                )
            )
        return out

    def claim_abandoned(self, count: int = 100) -> list[StreamEvent]:
        """Take over entries other consumers read but never acknowledged."""
        out: list[StreamEvent] = []
        for stream in self._streams:
            reply = self._client.xautoclaim(
                stream, self.group, self.consumer, self._claim_idle_ms, "0-0", count=count
            )
            out += self._entries(stream, reply[1])
        return out

    def read(self, count: int = 100, block_ms: int | None = 1000) -> list[StreamEvent]:
        """Next entries for this consumer: its own backlog first, then claimed, then new."""
        try:
            if not self._backlog_done:
                pending = self._read(dict.fromkeys(self._streams, "0"), count, None)
                if pending:
                    return pending
                self._backlog_done = True
                claimed = self.claim_abandoned(count)
                if claimed:
                    return claimed
            return self._read(dict.fromkeys(self._streams, ">"), count, block_ms)
        except TRANSIENT_ERRORS as exc:
            raise StoreUnavailable(str(exc)) from exc

    def _read(self, ids: dict[str, str], count: int, block_ms: int | None) -> list[StreamEvent]:
        streams: Any = ids  # redis-py's annotation wants a dict of bytes|str|memoryview
        reply: Any = self._client.xreadgroup(
            self.group, self.consumer, streams, count=count, block=block_ms
        )
        out: list[StreamEvent] = []
        for stream, rows in reply or []:
            out += self._entries(_text(stream), rows)
        return out

    def ack(self, event: StreamEvent) -> None:
        try:
            self._client.xack(event.stream, self.group, event.entry_id)
        except TRANSIENT_ERRORS as exc:
            raise StoreUnavailable(str(exc)) from exc
