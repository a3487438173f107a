"""Celery's task events (what Flower follows), published in batches.

With task events on (a Flower attached), a worker's main process sends three events a
job (received, started, succeeded). Celery buffers them and publishes what is buffered
on the event loop's next turn, one Redis PUBLISH (a round trip, waited for) per turn.
A turn usually holds a single event, so the main process does a round trip for nearly
every event, and when the pool children answer quickly it is the main process that
limits throughput.

:class:`Consumer` publishes the buffer :data:`FLUSH_SECONDS` after the first event that
went into it instead: a busy worker then sends up to 24 events per PUBLISH (Celery's
``buffer_limit``, which still publishes a full buffer at once), and an event normally
reaches a watcher that much later. The timer is armed from the event loop's own thread
(events are also sent from a threads pool's threads, and kombu's timer is the loop's).
The buffer is also published

* when the consumer closes its connection after a broker error, before Celery replaces
  the event dispatcher: a publish that fails then keeps the events in the dispatcher's
  outbound buffer, which Celery carries over to the new connection (stock Celery does
  the same through its loop's pending callbacks);
* before the consumer stops or shuts down, so a worker that shuts down sends the
  events of its last jobs.

A worker killed outright loses the events of its last interval, where stock Celery
loses those of its last turn; events are for watching, never for answers (those go
through the result stream).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer

# Short against what a watcher notices (Flower refreshes its pages per second; each
# event carries the time it happened, not the time it was published), long against the
# interval between jobs even of a slowed-down worker, so that one PUBLISH carries many
# events.
FLUSH_SECONDS = 0.05


class Consumer(CeleryConsumer):  # type: ignore[misc]  # celery is untyped
    """Celery's consumer, publishing buffered task events on a short timer."""

    _flush_entry: Any = None  # the armed timer's entry (kombu's timer Entry)

    def on_send_event_buffered(self) -> None:
        # Celery passes this callback only to a dispatcher of a consumer with a hub.
        entry = self._flush_entry
        if entry is not None and not entry.canceled:
            return  # armed: the event goes out with the others
        self.hub.call_soon(self._arm)  # thread-safe and wakes the loop, unlike call_later

    def _arm(self) -> None:
        entry = self._flush_entry
        if entry is None or entry.canceled:
            self._flush_entry = self.hub.call_later(FLUSH_SECONDS, self._flush_buffered)

    def _flush_buffered(self) -> None:
        self._flush_entry = None
        dispatcher = self.event_dispatcher
        if dispatcher is not None:
            dispatcher.flush()

    def on_close(self) -> Any:
        return self._flushed_first(super().on_close)

    def stop(self) -> Any:
        return self._flushed_first(super().stop)

    def shutdown(self) -> Any:
        return self._flushed_first(super().shutdown)

    def _flushed_first(self, step: Callable[[], Any]) -> Any:
        try:
            self._flush_buffered()
        finally:
            outcome = step()  # whatever the publish did, Celery's own step runs
        return outcome
