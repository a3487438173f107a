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
from apportion.workers.results.subscriber import StreamEvent, StreamSubscriber


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
    """Redis away while following: retried with backoff until ``connect_timeout``."""

    where: str
    connect_timeout: float
    since: float | None = None
    backoff: float = 0.5

    def ended(self) -> None:
        self.since, self.backoff = None, 0.5

    def give_up(self, exc: StoreUnavailable, idle_over: bool) -> bool:
        """Say so on stderr; True when following should stop, else after a backoff."""
        now = time.monotonic()
        self.since = self.since or now
        if now - self.since >= self.connect_timeout or idle_over:
            print(
                f"apportion events: cannot reach Redis at {self.where} "
                f"(for {now - self.since:.0f} s): {error_text(exc)}",
                file=sys.stderr,
            )
            return True
        print(
            f"apportion events: Redis at {self.where} unavailable ({error_text(exc)}); retrying",
            file=sys.stderr,
        )
        time.sleep(self.backoff)
        self.backoff = min(self.backoff * 2, 5.0)
        return False


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
) -> int:
    """Follow the streams; 0 when done (count reached, idle), 1 when Redis stayed away.

    Redis being unreachable is retried with backoff for ``connect_timeout`` seconds
    (a restart rides through), then the command gives up with a message; ``idle_exit``
    counts the time Redis is away too, so a script using it never waits longer.
    """
    settings = get_settings()
    keys = Keys(settings.stream_prefix)
    streams = [keys.results_stream(k) for k in kinds]
    # No reconnect loop inside a call: this loop retries, and keeps its deadlines.
    sub = StreamSubscriber(
        client_for(settings, retries=0),
        streams,
        group=group or SUBSCRIBER_GROUP,
        consumer=consumer,
        claim_idle_ms=claim_idle_ms,
    )
    outage = _Outage(redact_url(settings.redis_url), connect_timeout)
    seen = 0
    last = time.monotonic()
    while count is None or seen < count:
        idle_over = idle_exit is not None and time.monotonic() - last > idle_exit
        try:
            sub.ensure_groups()
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
            sub.ack(event)
            seen += 1
            last = time.monotonic()
    return 0
