"""Following the result streams with a consumer group (``apportion events``).

A subscriber that crashes resumes where it stopped: entries it had read but not
acknowledged stay in its pending list and are read again first (reading from id
``0``), and entries left pending by a consumer that never came back are claimed
with XAUTOCLAIM once idle for ``claim_idle_ms`` — checked at start and then every
``claim_idle_ms``, so a consumer that dies while another runs is taken over too.
Acknowledge after processing and nothing is missed (at-least-once: an entry processed
but not yet acknowledged when its consumer died is delivered again); entries carry
job_id and their stream id so a consumer can deduplicate.

A subscriber comes back as itself: its default consumer name is the host's name
(:func:`default_consumer_name`), the same after every restart, so a restarted one reads
its own pending entries at once instead of waiting ``claim_idle_ms`` for another to
claim them. Consumers that have been idle longer than ``forget_idle_ms`` (an hour by
default; a live consumer's idle time never exceeds one blocking read, a few seconds)
and hold no pending entry are removed from the group at the same sweeps: renamed hosts
and retired containers do not pile up in ``XINFO CONSUMERS``. One with pending entries
stays until they are claimed (deleting it would drop them).

:class:`StreamReader` follows the same streams without a group (``apportion events
--from-start`` / ``--no-group``): it moves no group's position and acknowledges nothing.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import redis

from apportion.errors import StoreUnavailable
from apportion.workers.redis.client import REDIS_ERRORS, is_outage
from apportion.workers.redis.keys import SUBSCRIBER_GROUP
from apportion.workers.results.publisher import ENVELOPE_KEY, recorded_envelope


@dataclass(frozen=True, slots=True)
class StreamEvent:
    stream: str
    entry_id: str
    fields: dict[str, str]
    # The envelope, read from the result record an entry refers to (``envelope_key``:
    # a big envelope is kept once, there; workers/results/publisher.py).
    recorded: dict[str, Any] | None = None

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
        if self.recorded is not None:
            return self.recorded
        payload: dict[str, Any] = json.loads(self.fields.get("envelope", "{}"))
        return payload


def with_envelopes(client: redis.Redis, events: list[StreamEvent]) -> list[StreamEvent]:
    """``events``, those whose entry refers to a result record with its envelope read
    from it (one MGET for all). A record gone (expired) leaves the event without one."""
    refer = [e for e in events if ENVELOPE_KEY in e.fields and "envelope" not in e.fields]
    if not refer:
        return events
    try:
        stored: Any = client.mget([e.fields[ENVELOPE_KEY] for e in refer])
    except REDIS_ERRORS as exc:
        if not is_outage(exc):
            raise
        raise StoreUnavailable(str(exc)) from exc
    found = {id(e): recorded_envelope(value) for e, value in zip(refer, stored or [], strict=False)}
    return [
        replace(e, recorded=found[id(e)]) if found.get(id(e)) is not None else e for e in events
    ]


def default_consumer_name() -> str:
    """The host's name: stable across restarts of a subscriber on the same host (two
    subscribers of one group on one host each need a ``consumer`` of their own)."""
    return socket.gethostname() or f"pid-{os.getpid()}"


# Consumers idle this long without pending entries are removed from the group.
FORGET_IDLE_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class GroupPosition:
    """Where a group stands on one stream, as ``events`` reports it at start."""

    stream: str
    last_delivered: str
    entries_read: int | None  # None: Redis cannot tell (Redis < 7, or entries deleted)
    lag: int | None
    pending: int
    mine: int  # of ``pending``, this consumer's (read again first)


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
        forget_idle_ms: int = FORGET_IDLE_MS,
    ) -> None:
        self._client = client
        self._streams = list(streams)
        self.group = group
        self.consumer = consumer or default_consumer_name()
        self._start = start
        self._claim_idle_ms = claim_idle_ms
        self._forget_idle_ms = forget_idle_ms
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
        return with_envelopes(self._client, out)

    def positions(self) -> list[GroupPosition]:
        """Where the group stands on each stream (after :meth:`ensure_groups`)."""
        out = []
        try:
            for stream in self._streams:
                group = next(
                    (
                        g
                        for g in self._client.xinfo_groups(stream)
                        if _text(g["name"]) == self.group
                    ),
                    None,
                )
                if group is None:
                    continue
                mine = sum(
                    int(c["pending"])
                    for c in self._client.xinfo_consumers(stream, self.group)
                    if _text(c["name"]) == self.consumer
                )
                read, lag = group.get("entries-read"), group.get("lag")
                out.append(
                    GroupPosition(
                        stream=stream,
                        last_delivered=_text(group["last-delivered-id"]),
                        entries_read=None if read is None else int(read),
                        lag=None if lag is None else int(lag),
                        pending=int(group["pending"]),
                        mine=mine,
                    )
                )
        except REDIS_ERRORS as exc:
            if not is_outage(exc):
                raise
            raise StoreUnavailable(str(exc)) from exc
        return out

    def forget_idle_consumers(self) -> list[str]:
        """Remove the group's consumers idle longer than ``forget_idle_ms`` that hold no
        pending entry (not this one); returns them as ``stream/consumer``."""
        gone = []
        for stream in self._streams:
            try:
                consumers = self._client.xinfo_consumers(stream, self.group)
                for c in consumers:
                    name = _text(c["name"])
                    if (
                        name != self.consumer
                        and int(c["pending"]) == 0
                        and int(c["idle"]) > self._forget_idle_ms
                    ):
                        self._client.xgroup_delconsumer(stream, self.group, name)
                        gone.append(f"{stream}/{name}")
            except REDIS_ERRORS as exc:
                if isinstance(exc, redis.ResponseError) and "NOGROUP" in str(exc):
                    continue
                if not is_outage(exc):
                    raise
                raise StoreUnavailable(str(exc)) from exc
        return gone

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
                self.forget_idle_consumers()
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


class StreamReader:
    """The streams without a group: from their first entry (``start="0"``) or from new
    ones (``"$"``); nothing is acknowledged, no group's position moves."""

    def __init__(self, client: redis.Redis, streams: Sequence[str], *, start: str = "0") -> None:
        self._client = client
        self._ids = dict.fromkeys(streams, start)
        self.group = None
        self.consumer = None

    def ensure_groups(self) -> None:
        """Nothing to create; the ``$`` of a stream is pinned at the first call, so that
        entries published while Redis was away are not skipped."""
        for stream, at in self._ids.items():
            if at == "$":
                try:
                    last: Any = self._client.xrevrange(stream, count=1)
                except REDIS_ERRORS as exc:
                    if not is_outage(exc):
                        raise
                    raise StoreUnavailable(str(exc)) from exc
                self._ids[stream] = _text(last[0][0]) if last else "0-0"

    def read(self, count: int = 100, block_ms: int | None = 1000) -> list[StreamEvent]:
        try:
            ids: Any = dict(self._ids)  # redis-py's annotation wants bytes|str keys
            reply: Any = self._client.xread(ids, count=count, block=block_ms)
        except REDIS_ERRORS as exc:
            if not is_outage(exc):
                raise
            raise StoreUnavailable(str(exc)) from exc
        out = []
        for stream, rows in reply or []:
            name = _text(stream)
            for entry_id, raw in rows or []:
                self._ids[name] = _text(entry_id)
                out.append(
                    StreamEvent(
                        stream=name,
                        entry_id=_text(entry_id),
                        fields={_text(k): _text(v) for k, v in raw.items()},
                    )
                )
        return with_envelopes(self._client, out)

    def ack(self, event: StreamEvent) -> None:
        """Nothing to acknowledge without a group."""
