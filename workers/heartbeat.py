"""Worker events (heartbeats, online/offline) that cannot hold the consumer loop.

Celery's heartbeat sends ``worker-heartbeat`` every 2 s from the worker's event loop
with ``retry=True`` and no retry policy, which kombu reads as "reconnect until it
works": behind a partition the loop stayed inside one heartbeat's publish for as long as
Redis was away, so no time limit fired, no job was taken and nothing was logged. Events
are for watching, never for answers (those go through the result stream), so here

* every event is published once, without kombu's reconnection loop: a failed publish
  waits one socket timeout at most and is kept in Celery's outbound buffer, sent with
  the next publish that works;
* while the worker's own watch finds Redis unreachable (workers/redis/reachability.py),
  heartbeats are not published at all and buffered task events are held, so the loop
  spends no socket timeout on them.

Set as the app's ``events`` class (workers/app.py), for workers and producers alike.
"""

from __future__ import annotations

from typing import Any

from celery.app.events import Events as CeleryEvents
from celery.events.dispatcher import EventDispatcher
from celery.events.event import group_from

from apportion.workers.redis.reachability import unreachable


class BoundedDispatcher(EventDispatcher):  # type: ignore[misc]  # celery is untyped
    """Celery's event dispatcher, publishing each event once and none into a partition."""

    def send(self, type: str, *args: Any, **fields: Any) -> Any:
        if group_from(type) == "worker" and unreachable():
            return None  # the next heartbeat, after Redis answers again, says the same
        fields["retry"] = False
        fields.pop("retry_policy", None)
        return super().send(type, *args, **fields)

    def flush(self, errors: bool = True, groups: bool = True) -> Any:
        if unreachable():
            return None  # kept for the first flush once Redis answers again
        return super().flush(errors=errors, groups=groups)


class Events(CeleryEvents):  # type: ignore[misc]
    dispatcher_cls = "apportion.workers.heartbeat:BoundedDispatcher"


__all__ = ["BoundedDispatcher", "Events"]
