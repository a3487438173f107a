"""Canary: the Celery internals workers/task_events.py builds on are still there.

The batched task events subclass Celery's worker ``Consumer`` and rely on how Celery
wires its event dispatcher to it; none of that is documented API. Each piece is named
here, so that a Celery upgrade that changes one fails with a message naming it instead
of a worker that silently publishes one event per round trip again (or loses the events
buffered before a reconnect). The integration test with ``-E``
(tests/integration/test_flower.py) shows the whole path working; this file says which
part broke.
"""

from __future__ import annotations

import inspect

import celery
import pytest
from celery.events.dispatcher import EventDispatcher
from celery.worker.consumer import Consumer
from celery.worker.consumer.events import Events
from kombu.asynchronous import Hub
from kombu.asynchronous.timer import Entry

from apportion.workers.task_events import Consumer as BatchingConsumer

CONSUMER_INTERNALS = {
    "on_send_event_buffered": "overridden: arms the flush timer instead of flushing "
    "on the loop's next turn",
    "on_close": "extended: the buffer is published before Celery replaces the dispatcher",
    "stop": "extended: the buffer is published before the consumer stops",
    "shutdown": "extended: the buffer is published before the worker shuts down",
}


def test_celery_is_the_version_the_batched_events_were_written_against() -> None:
    major, minor = (int(part) for part in celery.__version__.split(".")[:2])
    assert (major, minor) == (5, 7), (
        f"celery {celery.__version__}: workers/task_events.py was checked against 5.7; "
        "re-read celery/worker/consumer/events.py and celery/events/dispatcher.py "
        "for the members named in this file"
    )


@pytest.mark.parametrize(("name", "why"), CONSUMER_INTERNALS.items())
def test_celerys_worker_consumer_still_has(name: str, why: str) -> None:
    assert callable(getattr(Consumer, name, None)), (
        f"celery.worker.consumer.Consumer no longer has {name!r} ({why})"
    )
    assert name in vars(BatchingConsumer)  # and apportion's subclass still replaces it


def test_celery_hands_the_consumers_buffered_callback_to_the_event_dispatcher() -> None:
    # The only call of Consumer.on_send_event_buffered is the one the Events bootstep
    # passes to the dispatcher it creates; without it the timer is never armed.
    source = inspect.getsource(Events.start)
    assert "on_send_buffered=c.on_send_event_buffered" in source, (
        "celery's Events bootstep no longer passes c.on_send_event_buffered to the event "
        "dispatcher: workers/task_events.py's timer is never armed"
    )
    assert "buffer_group=" in source, "celery no longer buffers task events at all"


def test_the_event_dispatcher_buffers_calls_back_and_flushes() -> None:
    parameters = inspect.signature(EventDispatcher.__init__).parameters
    for name in ("on_send_buffered", "buffer_group", "buffer_limit"):
        assert name in parameters, f"celery's EventDispatcher no longer takes {name!r}"
    assert callable(getattr(EventDispatcher, "flush", None)), (
        "celery's EventDispatcher no longer has flush(): the timer cannot publish the buffer"
    )
    send = inspect.getsource(EventDispatcher.send)
    assert "self.on_send_buffered" in send, (
        "EventDispatcher.send no longer calls on_send_buffered for a buffered event"
    )


def test_kombus_hub_schedules_from_other_threads_and_its_timer_entries_can_be_cancelled() -> None:
    # The timer is armed through call_soon (safe from a threads pool's threads), then
    # call_later on the loop; an entry Celery cancelled is armed again.
    assert callable(getattr(Hub, "call_soon", None))
    assert callable(getattr(Hub, "call_later", None))
    assert "canceled" in Entry.__slots__ or hasattr(Entry, "canceled"), (
        "kombu's timer Entry no longer has 'canceled'"
    )
