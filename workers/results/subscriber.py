"""Following the result streams with a consumer group (``apportion events``).

A subscriber that crashes resumes where it stopped: entries it had read but not
acknowledged stay in its pending list and are read again first (reading from id
``0``), and entries left pending by a consumer that never came back are claimed
with XAUTOCLAIM once idle for ``claim_idle_ms`` — checked at start and then every
``claim_idle_ms``, so a consumer that dies while another runs is taken over too.
Acknowledge after processing and nothing is missed (at-least-once: an entry processed
but not yet acknowledged when its consumer died is delivered again); entries carry
job_id and their stream id so a consumer can deduplicate.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from apportion.errors import StoreUnavailable
from apportion.workers.redis.client import REDIS_ERRORS, is_outage
from apportion.workers.redis.keys import SUBSCRIBER_GROUP


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
        self._next_claim = 0.0  # monotonic time of the next XAUTOCLAIM sweep

    def ensure_groups(self) -> None:
        for stream in self._streams:
            try:
                self._client.xgroup_create(stream, self.group, id=self._start, mkstream=True)
            except REDIS_ERRORS as exc:
                if isinstance(exc, redis.ResponseError) and "BUSYGROUP" in str(exc):
                    continue  # the group exists already
                if not is_outage(exc):
                    raise
                raise StoreUnavailable(str(exc)) from exc

    def _entries(self, stream: str, rows: Any) -> list[StreamEvent]:
        out = []
        trimmed = []
        for entry_id, raw in rows or []:
            if not raw:  # deleted by MAXLEN trimming while pending (redis-py gives {})
                trimmed.append(entry_id)
                continue
            out.append(
                StreamEvent(
                    stream=stream,
                    entry_id=_text(entry_id),
                    fields={_text(k): _text(v) for k, v in raw.items()},
                )
            )
        if trimmed:
            # Nothing left to process; acknowledging keeps the pending list from
            # holding them (and being re-read) forever.
            try:
                self._client.xack(stream, self.group, *trimmed)
            except REDIS_ERRORS as exc:
                if not is_outage(exc):
                    raise
                raise StoreUnavailable(str(exc)) from exc
        return out

    def claim_abandoned(self, count: int = 100) -> list[StreamEvent]:
        """Take over entries other consumers read but never acknowledged."""
        out: list[StreamEvent] = []
        for stream in self._streams:
            try:
                reply = self._client.xautoclaim(
                    stream, self.group, self.consumer, self._claim_idle_ms, "0-0", count=count
                )
            except REDIS_ERRORS as exc:
                if not is_outage(exc):
                    raise
                raise StoreUnavailable(str(exc)) from exc
            out += self._entries(stream, reply[1])
        return out

    def read(self, count: int = 100, block_ms: int | None = 1000) -> list[StreamEvent]:
        """Next entries for this consumer: its own backlog first, then claimed, then new."""
        try:
            while not self._backlog_done:
                pending, rows = self._read_rows(dict.fromkeys(self._streams, "0"), count, None)
                if pending:
                    return pending
                # No rows: the backlog is done. Rows but no events: all were trimmed
                # (and are acknowledged now); read on.
                self._backlog_done = rows == 0
            if time.monotonic() >= self._next_claim:
                claimed = self.claim_abandoned(count)
                if claimed:
                    return claimed  # more may be waiting: sweep again on the next read
                # At most every 250 ms, so a tiny claim_idle_ms cannot make a busy loop.
                self._next_claim = time.monotonic() + max(self._claim_idle_ms, 250) / 1000
            if block_ms is not None:
                # Wake up in time for the next sweep.
                until_claim = int((self._next_claim - time.monotonic()) * 1000)
                block_ms = max(1, min(block_ms, until_claim))
            return self._read(dict.fromkeys(self._streams, ">"), count, block_ms)
        except REDIS_ERRORS as exc:
            if not is_outage(exc):
                raise
            raise StoreUnavailable(str(exc)) from exc

    def _read(self, ids: dict[str, str], count: int, block_ms: int | None) -> list[StreamEvent]:
        return self._read_rows(ids, count, block_ms)[0]

    def _read_rows(
        self, ids: dict[str, str], count: int, block_ms: int | None
    ) -> tuple[list[StreamEvent], int]:
        """The events read, and how many rows the reply had (trimmed entries included)."""
        streams: Any = ids  # redis-py's annotation wants a dict of bytes|str|memoryview
        reply: Any = self._client.xreadgroup(
            self.group, self.consumer, streams, count=count, block=block_ms
        )
        out: list[StreamEvent] = []
        rows_seen = 0
        for stream, rows in reply or []:
            rows_seen += len(rows or [])
            out += self._entries(_text(stream), rows)
        return out, rows_seen

    def ack(self, event: StreamEvent) -> None:
        try:
            self._client.xack(event.stream, self.group, event.entry_id)
        except REDIS_ERRORS as exc:
            if not is_outage(exc):
                raise
            raise StoreUnavailable(str(exc)) from exc
