"""Celery's task events (what Flower follows), published in batches.

With task events on (a Flower attached), a worker's main process sends three events a
job (received, started, succeeded). Celery buffers them and publishes what is buffered
on the event loop's next turn, one Redis PUBLISH (a round trip, waited for) per turn.
A turn usually holds a single event, so the main process does a round trip for nearly
every event, and when the pool children answer quickly it is the main process that
limits throughput.

:class:`Consumer` publishes the buffer at most every :data:`FLUSH_SECONDS` instead:
a busy worker then sends up to 24 events per PUBLISH, and no event waits longer than
that interval. Celery's own limit still applies too: a buffer of ``buffer_limit``
events (24) is published at once. The buffer is published before the consumer stops,
so a worker that shuts down sends the events of its last jobs, as stock Celery does; a
worker killed outright loses the events of its last interval, where stock Celery
loses those of its last turn (events are for watching, never for answers: those go
through the result stream).
"""

from __future__ import annotations

from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer

# Short against what a watcher notices (Flower refreshes its pages per second; each
# event carries the time it happened, not the time it was published), long against the
# interval between jobs even of a slowed-down worker, so that one PUBLISH carries many
# events; a busy worker fills Celery's buffer of 24 events before it ends.
FLUSH_SECONDS = 0.05


class Consumer(CeleryConsumer):  # type: ignore[misc]  # celery is untyped
    """Celery's consumer, publishing buffered task events on a short timer."""

    _flush_due = False

    def on_send_event_buffered(self) -> None:
        if self.hub is None:  # no event loop: Celery publishes each event at once
            super().on_send_event_buffered()
            return
        if not self._flush_due:
            self._flush_due = True
            self.hub.call_later(FLUSH_SECONDS, self._flush_buffered)

    def _flush_buffered(self) -> None:
        self._flush_due = False
        dispatcher = self.event_dispatcher
        if dispatcher is not None:
            dispatcher.flush()

    def stop(self) -> Any:
        self._flush_buffered()
        return super().stop()

    def shutdown(self) -> Any:
        self._flush_buffered()
        return super().shutdown()
