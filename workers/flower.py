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

The app registers no tasks: Flower learns task names from the events, and importing
the engines would only slow its start.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from apportion.config.celeryconfig import celery_config
from apportion.config.settings import get_settings

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
        return super().connection(*args, transport_options=options, **kwargs)


def create_flower_app() -> Celery:
    app = FlowerApp("apportion", set_as_current=False)
    app.config_from_object(celery_config(get_settings()))
    return app


app = create_flower_app()
