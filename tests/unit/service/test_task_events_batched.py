"""The worker's consumer publishes buffered task events on a short timer, and before it stops.

tests/integration/test_task_events.py shows the effect through a real worker and
Redis (every event arrives, many to a PUBLISH); these pin the consumer's own rules.
"""

from __future__ import annotations

from typing import Any

import pytest
from celery.worker.consumer import Consumer as CeleryConsumer

from apportion.workers import task_events


class Hub:
    def __init__(self) -> None:
        self.timers: list[tuple[float, Any]] = []

    def call_later(self, delay: float, callback: Any, *args: Any) -> None:
        self.timers.append((delay, callback))

    def fire(self) -> None:
        due, self.timers = self.timers, []
        for _, callback in due:
            callback()


class Dispatcher:
    def __init__(self) -> None:
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1


def _consumer(hub: Hub | None) -> tuple[task_events.Consumer, Dispatcher]:
    # Celery's Consumer needs a whole worker to be built; only these two attributes
    # are read by the methods under test.
    consumer = task_events.Consumer.__new__(task_events.Consumer)
    dispatcher = Dispatcher()
    consumer.hub = hub
    consumer.event_dispatcher = dispatcher
    return consumer, dispatcher


def test_events_buffered_within_one_interval_are_published_together_once_it_ends() -> None:
    hub = Hub()
    consumer, dispatcher = _consumer(hub)

    for _ in range(5):
        consumer.on_send_event_buffered()

    assert [delay for delay, _ in hub.timers] == [task_events.FLUSH_SECONDS]
    assert dispatcher.flushes == 0
    hub.fire()
    assert dispatcher.flushes == 1


def test_an_event_buffered_after_a_publish_starts_a_new_interval() -> None:
    hub = Hub()
    consumer, dispatcher = _consumer(hub)
    consumer.on_send_event_buffered()
    hub.fire()

    consumer.on_send_event_buffered()

    assert len(hub.timers) == 1
    hub.fire()
    assert dispatcher.flushes == 2


def test_the_buffer_is_published_before_the_consumer_stops_or_shuts_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    order: list[str] = []
    monkeypatch.setattr(CeleryConsumer, "stop", lambda self: order.append("stop"))
    monkeypatch.setattr(CeleryConsumer, "shutdown", lambda self: order.append("shutdown"))
    consumer, dispatcher = _consumer(Hub())
    monkeypatch.setattr(dispatcher, "flush", lambda: order.append("flush"))

    consumer.stop()
    consumer.shutdown()

    assert order == ["flush", "stop", "flush", "shutdown"]


def test_a_consumer_without_an_event_loop_publishes_as_celery_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    celerys: list[bool] = []
    monkeypatch.setattr(CeleryConsumer, "on_send_event_buffered", lambda self: celerys.append(True))
    consumer, dispatcher = _consumer(None)

    consumer.on_send_event_buffered()

    assert celerys == [True]
    assert dispatcher.flushes == 0
