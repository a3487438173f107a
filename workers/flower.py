"""The Celery app Flower runs with: ``celery -A apportion.workers.flower flower``.

Flower follows the workers' task events on one connection, and when that connection
fails it sleeps before trying again, doubling the sleep after every failed attempt
and never capping it (flower.events.Events.run). Each attempt failed while Redis was
down, so after an outage of a minute Flower waited about a minute more before it
looked again, after ten minutes about ten more: blind to every task in between.

Here the plain ``app.connection()`` that Flower's event thread asks for retries inside
kombu until Redis answers (every 2 s at most) instead of failing, so Flower's own
loop never sees a failed attempt and never grows its sleep: it follows events again
within seconds of Redis coming back (tests/integration/test_flower.py). Everything
else Flower does (the API's inspect and control calls, which use
``connection_for_write``) keeps the production settings and fails fast.

Workers send task events only while someone watches (config/celeryconfig.py): Flower
switches them on by remote control every 5 s, the first time 5 s after it starts. The
same connection switches them on at once, so a job sent as soon as Flower is up is
followed too, and again whenever Flower's event connection is made anew (a worker
remembers the switch across its own reconnections).

The app registers no tasks: Flower learns task names from the events, and importing
the engines would only slow its start.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery import Celery

from apportion.config.celeryconfig import celery_config
from apportion.config.settings import get_settings

log = logging.getLogger("apportion.flower")

# kombu's connection failover options (Connection.default_channel reads them from the
# transport options): retry for ever (no count, no overall timeout), 0.5 s, 1 s, then
# every 2 s.
EVENTS_RECONNECT: dict[str, Any] = {
    "max_retries": None,
    "connect_retries_timeout": None,
    "interval_start": 0.5,
    "interval_step": 0.5,
    "interval_max": 2.0,
}


class FlowerApp(Celery):  # type: ignore[misc]
    def connection(self, *args: Any, **kwargs: Any) -> Any:
        """The connection Flower's event thread captures events on (see the module doc)."""
        options = dict(kwargs.pop("transport_options", None) or {})
        for key, value in EVENTS_RECONNECT.items():
            options.setdefault(key, value)
        connection = super().connection(*args, transport_options=options, **kwargs)
        # Aside, so that a Redis still away holds up neither this connection nor Flower.
        threading.Thread(target=self.switch_task_events_on, daemon=True).start()
        return connection

    def switch_task_events_on(self) -> None:
        """What Flower's own timer does every 5 s (flower.events.Events.on_enable_events),
        now; a failure (Redis away) is left to that timer."""
        try:
            self.control.enable_events()
        except Exception as exc:  # Flower carries on, as after its own timer's failure
            log.warning("could not switch the workers' task events on yet: %s", exc)


def create_flower_app() -> Celery:
    app = FlowerApp("apportion", set_as_current=False)
    app.config_from_object(celery_config(get_settings()))
    return app


app = create_flower_app()
