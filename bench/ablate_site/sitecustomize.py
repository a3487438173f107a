"""A worker without some of the pieces apportion writes over library internals.

Loaded through ``PYTHONPATH`` by ``bench/bench_worker.py ablate`` (and
``bench/bench_big_job.py --without``) only: ``BENCH_WITHOUT`` names, comma-separated,
the pieces replaced by the public API they stand in for, so that each is measured
against what it replaces in one run:

* ``direct``: the main process's pop and ack scripts run through redis-py's
  ``Redis.evalsha`` on kombu's pool (workers/redis/direct.py drives one connection
  with ``send_command``/``read_response``);
* ``publisher``: the result event's script through the client's ``evalsha``
  (workers/results/publisher.py drives a connection of its own the same way);
* ``record``: the result stored by Celery's backend (``mark_as_done``) instead of by
  the event's script (workers/results/celery_result.py);
* ``events``: task events flushed on the event loop's next turn, as stock Celery does
  (workers/task_events.py publishes them in batches on a timer).
"""

from __future__ import annotations

import os
from typing import Any

_WITHOUT = {p for p in os.environ.get("BENCH_WITHOUT", "").split(",") if p}


def _evalsha(client: Any, text: str, sha: str, *args: Any) -> Any:
    import redis

    try:
        return client.evalsha(sha, *args)
    except redis.exceptions.NoScriptError:
        client.script_load(text)
        return client.evalsha(sha, *args)


def _without_direct() -> None:
    import redis

    from apportion.workers.redis import direct

    def run(self: Any, pool: Any, script: Any, keys: list[Any], args: list[Any]) -> Any:
        client = redis.Redis(connection_pool=pool)
        return _evalsha(client, script.text, script.sha, len(keys), *keys, *args)

    direct.DirectScripts.run = run  # type: ignore[method-assign]


def _without_publisher() -> None:
    from apportion.workers.results import publisher

    def publish_once(self: Any, conn: Any, args: list[Any]) -> Any:
        return _evalsha(self._client, publisher._PUBLISH_ONCE, publisher._PUBLISH_ONCE_SHA, *args)

    publisher.StreamPublisher._publish_once = publish_once  # type: ignore[method-assign]


def _without_record() -> None:
    from apportion.tasks import jobs

    jobs.can_record = lambda *args, **kwargs: False  # type: ignore[assignment]


def _without_events() -> None:
    from celery.worker.consumer import Consumer as CeleryConsumer

    from apportion.workers import task_events

    task_events.Consumer.on_send_event_buffered = CeleryConsumer.on_send_event_buffered  # type: ignore[method-assign]


if _WITHOUT:
    for _piece in sorted(_WITHOUT):
        globals()[f"_without_{_piece}"]()
