"""The worker's consumer publishes buffered task events on a short timer, armed from the
event loop, and before it closes a connection, stops or shuts down.

tests/integration/test_task_events.py shows the effect through a real worker and
Redis (every event arrives, many to a PUBLISH); these pin the consumer's own rules.
"""

from __future__ import annotations

from typing import Any

import pytest
from celery.worker.consumer import Consumer as CeleryConsumer

from apportion.workers import task_events


class Entry:
    def __init__(self, callback: Any) -> None:
        self.callback = callback
        self.canceled = False


class Hub:
    """kombu's hub as the consumer uses it: callbacks for the loop's next turn, timers."""

    def __init__(self) -> None:
        self.soon: list[Any] = []
        self.timers: list[tuple[float, Entry]] = []

    def call_soon(self, callback: Any) -> None:
        self.soon.append(callback)

    def call_later(self, delay: float, callback: Any) -> Entry:
        entry = Entry(callback)
        self.timers.append((delay, entry))
        return entry

    def turn(self) -> None:
        """One turn of the loop: the pending callbacks, then the timers due."""
        soon, self.soon = self.soon, []
        for callback in soon:
            callback()

    def fire(self) -> None:
        due, self.timers = self.timers, []
        for _, entry in due:
            if not entry.canceled:
                entry.callback()


class Dispatcher:
    def __init__(self) -> None:
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1


def _consumer(hub: Hub) -> tuple[task_events.Consumer, Dispatcher]:
    # Celery's Consumer needs a whole worker to be built; only these two attributes
    # are read by the methods under test.
    consumer = task_events.Consumer.__new__(task_events.Consumer)
    dispatcher = Dispatcher()
    consumer.hub = hub
    consumer.event_dispatcher = dispatcher
    return consumer, dispatcher


def test_events_buffered_before_the_timer_ends_are_published_together_once_it_does() -> None:
    hub = Hub()
    consumer, dispatcher = _consumer(hub)

    for _ in range(3):
        consumer.on_send_event_buffered()
    hub.turn()
    for _ in range(3):
        consumer.on_send_event_buffered()
    hub.turn()

    assert [delay for delay, _ in hub.timers] == [task_events.FLUSH_SECONDS]
    assert dispatcher.flushes == 0
    hub.fire()
    assert dispatcher.flushes == 1


def test_the_timer_is_armed_by_the_loop_not_by_the_thread_that_sent_the_event() -> None:
    hub = Hub()
    consumer, _ = _consumer(hub)

    consumer.on_send_event_buffered()  # e.g. from a threads pool's thread

    assert hub.timers == []
    assert len(hub.soon) == 1
    hub.turn()
    assert len(hub.timers) == 1


def test_an_event_buffered_after_a_publish_arms_a_new_timer() -> None:
    hub = Hub()
    consumer, dispatcher = _consumer(hub)
    consumer.on_send_event_buffered()
    hub.turn()
    hub.fire()

    consumer.on_send_event_buffered()
    hub.turn()

    assert len(hub.timers) == 1
    hub.fire()
    assert dispatcher.flushes == 2


def test_a_cancelled_timer_is_armed_again_by_the_next_event() -> None:
    hub = Hub()
    consumer, dispatcher = _consumer(hub)
    consumer.on_send_event_buffered()
    hub.turn()
    hub.timers[0][1].canceled = True

    consumer.on_send_event_buffered()
    hub.turn()
    hub.fire()

    assert dispatcher.flushes == 1


@pytest.mark.parametrize("step", ["on_close", "stop", "shutdown"])
def test_the_buffer_is_published_before_celerys_own_step(
    step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    monkeypatch.setattr(CeleryConsumer, step, lambda self: order.append(step))
    consumer, dispatcher = _consumer(Hub())
    monkeypatch.setattr(dispatcher, "flush", lambda: order.append("flush"))

    getattr(consumer, step)()

    assert order == ["flush", step]


def test_celerys_step_runs_even_when_publishing_the_buffer_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    closed: list[bool] = []
    monkeypatch.setattr(CeleryConsumer, "on_close", lambda self: closed.append(True))
    consumer, dispatcher = _consumer(Hub())

    def broken() -> None:
        raise ConnectionError("broker gone")

    monkeypatch.setattr(dispatcher, "flush", broken)

    with pytest.raises(ConnectionError):
        consumer.on_close()
    assert closed == [True]
