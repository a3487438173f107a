"""``apportion events``: print result events as they arrive, acknowledging each."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from apportion.codec import encode_text
from apportion.config.settings import get_settings
from apportion.errors import StoreUnavailable
from apportion.workers.redis.client import client_for, error_text, redact_url
from apportion.workers.redis.keys import SUBSCRIBER_GROUP, Keys
from apportion.workers.results.subscriber import (
    FORGET_IDLE_MS,
    StreamEvent,
    StreamReader,
    StreamSubscriber,
)


def _line(event: StreamEvent) -> str:
    env = event.envelope()
    error = env.get("error") or {}
    tail = f" — {error.get('message')}" if error else ""
    return f"{event.entry_id}  {event.kind:<18} {event.status:<10} {event.job_id}{tail}"


def _print(event: StreamEvent, as_json: bool) -> None:
    if as_json:
        record: dict[str, Any] = {
            "stream": event.stream,
            "id": event.entry_id,
            **event.fields,
            "envelope": event.envelope(),
        }
        print(encode_text(record), flush=True)
    else:
        print(_line(event), flush=True)


@dataclass
class _Outage:
    """Redis away while following: retried with backoff (at most 5 s apart) for as long
    as it lasts, or, with ``exit_on_disconnect``, until ``connect_timeout``."""

    where: str
    connect_timeout: float
    exit_on_disconnect: bool = False
    since: float | None = None
    backoff: float = 0.5
    said: float = 0.0  # when the outage was last reported (monotonic)

    def ended(self) -> None:
        if self.since is not None:
            print(
                f"apportion events: Redis at {self.where} is back after "
                f"{time.monotonic() - self.since:.0f} s; following again",
                file=sys.stderr,
            )
        self.since, self.backoff = None, 0.5

    def give_up(self, exc: StoreUnavailable, idle_over: bool) -> bool:
        """Say so on stderr; True when following should stop, else after a backoff."""
        now = time.monotonic()
        self.since = self.since or now
        away = now - self.since
        if (self.exit_on_disconnect and away >= self.connect_timeout) or idle_over:
            print(
                f"apportion events: cannot reach Redis at {self.where} "
                f"(for {away:.0f} s): {error_text(exc)}",
                file=sys.stderr,
            )
            return True
        if away == 0 or now - self.said >= 30:
            # The first time, then every 30 s: an outage of hours is not a line a second.
            print(
                f"apportion events: Redis at {self.where} unavailable ({error_text(exc)}); "
                f"retrying (for {away:.0f} s so far)",
                file=sys.stderr,
            )
            self.said = now
        time.sleep(self.backoff)
        self.backoff = min(self.backoff * 2, 5.0)
        return False


def describe_start(sub: StreamSubscriber | StreamReader, from_start: bool) -> list[str]:
    """What ``events`` says on stderr before the first event: where it starts reading."""
    if isinstance(sub, StreamReader):
        where = "the first entry each stream holds" if from_start else "new entries"
        return [
            f"apportion events: reading without a consumer group from {where}; nothing is "
            "acknowledged and no group's position moves"
        ]
    lines = []
    for p in sub.positions():
        consumed = (
            f"{p.entries_read} entries already delivered to the group"
            if p.entries_read is not None
            else "entries already delivered to the group"
        )
        waiting = "" if p.lag is None else f", {p.lag} waiting"
        mine = f" ({p.mine} of them this consumer's, read again first)" if p.mine else ""
        lines.append(
            f"apportion events: {p.stream}: group {sub.group!r}, consumer {sub.consumer!r}: "
            f"{consumed} (up to {p.last_delivered}){waiting}, {p.pending} pending{mine}; "
            "reading on from there"
        )
    if lines:
        lines.append(
            "apportion events: --from-start reads everything the streams hold (without a "
            "group), --no-group only new entries, --group NAME another group's position"
        )
    return lines


def follow(
    *,
    kinds: Sequence[str],
    group: str | None,
    consumer: str | None,
    count: int | None,
    as_json: bool,
    idle_exit: float | None,
    claim_idle_ms: int = 60_000,
    connect_timeout: float = 30.0,
    exit_on_disconnect: bool = False,
    forget_idle_ms: int = FORGET_IDLE_MS,
    from_start: bool = False,
    no_group: bool = False,
) -> int:
    """Follow the streams; 0 when done (count reached, idle), 1 when Redis stayed away.

    Redis being unreachable is retried with backoff for as long as it lasts (a restart,
    a partition ride through); with ``exit_on_disconnect`` the command gives up after
    ``connect_timeout`` seconds instead. ``idle_exit`` counts the time Redis is away
    too, so a script using it never waits longer. ``from_start`` / ``no_group``: read
    without a group, from each stream's first entry / from new entries.
    """
    settings = get_settings()
    keys = Keys(settings.stream_prefix)
    streams = [keys.results_stream(k) for k in kinds]
    # No reconnect loop inside a call: this loop retries, and keeps its deadlines.
    client = client_for(settings, retries=0)
    sub: StreamSubscriber | StreamReader
    if from_start or no_group:
        sub = StreamReader(client, streams, start="0" if from_start else "$")
    else:
        sub = StreamSubscriber(
            client,
            streams,
            group=group or SUBSCRIBER_GROUP,
            consumer=consumer,
            claim_idle_ms=claim_idle_ms,
            forget_idle_ms=forget_idle_ms,
        )
    outage = _Outage(redact_url(settings.redis_url), connect_timeout, exit_on_disconnect)
    seen = 0
    last = time.monotonic()
    described = False
    while count is None or seen < count:
        idle_over = idle_exit is not None and time.monotonic() - last > idle_exit
        try:
            sub.ensure_groups()
            if not described:
                for line in describe_start(sub, from_start):
                    print(line, file=sys.stderr)
                described = True
            events = sub.read(count=100 if count is None else max(1, count - seen))
            outage.ended()
        except StoreUnavailable as exc:
            if outage.give_up(exc, idle_over):
                return 1
            continue
        if not events and idle_over:
            break
        for event in events:
            _print(event, as_json)
            try:
                sub.ack(event)
            except StoreUnavailable:
                # Printed but not acknowledged: delivered again (at least once).
                break
            seen += 1
            last = time.monotonic()
    return 0
