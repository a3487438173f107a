"""``apportion events``: print result events as they arrive, acknowledging each."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from apportion.config.settings import get_settings
from apportion.errors import StoreUnavailable
from apportion.workers.redis.client import get_redis
from apportion.workers.redis.keys import SUBSCRIBER_GROUP, Keys
from apportion.workers.results.subscriber import StreamEvent, StreamSubscriber


def _line(event: StreamEvent) -> str:
    env = event.envelope()
    error = env.get("error") or {}
    tail = f" — {error.get('message')}" if error else ""
    return f"{event.entry_id}  {event.kind:<18} {event.status:<10} {event.job_id}{tail}"


def follow(
    *,
    kinds: Sequence[str],
    group: str | None,
    consumer: str | None,
    count: int | None,
    as_json: bool,
    idle_exit: float | None,
    claim_idle_ms: int = 60_000,
) -> int:
    settings = get_settings()
    keys = Keys(settings.stream_prefix)
    streams = [keys.results_stream(k) for k in kinds]
    sub = StreamSubscriber(
        get_redis(settings),
        streams,
        group=group or SUBSCRIBER_GROUP,
        consumer=consumer,
        claim_idle_ms=claim_idle_ms,
    )
    seen = 0
    last = time.monotonic()
    backoff = 0.5
    while count is None or seen < count:
        try:
            sub.ensure_groups()
            events = sub.read(count=100 if count is None else max(1, count - seen))
            backoff = 0.5
        except StoreUnavailable as exc:
            print(f"apportion events: Redis unavailable ({exc}); retrying", file=sys.stderr)
            time.sleep(backoff)
            backoff = min(backoff * 2, 10.0)
            continue
        if not events and idle_exit is not None and time.monotonic() - last > idle_exit:
            break
        for event in events:
            if as_json:
                record: dict[str, Any] = {
                    "stream": event.stream,
                    "id": event.entry_id,
                    **event.fields,
                    "envelope": event.envelope(),
                }
                print(json.dumps(record), flush=True)
            else:
                print(_line(event), flush=True)
            sub.ack(event)
            seen += 1
            last = time.monotonic()
    return 0
