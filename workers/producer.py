"""The producer side of the Celery app: the production configuration, no tasks.

Producers send by task name (``apportion.partition``), so they need the routes,
serializers and retry policy of :func:`apportion.config.celeryconfig.celery_config`
but none of the task code: ``apportion submit`` and ``apportion health`` use this app
instead of :mod:`apportion.workers.app`, which imports every engine (numpy, scipy,
yaql) to register the tasks, seconds of start-up a producer has no use for.
"""

from __future__ import annotations

import time
from typing import Any

from celery import Celery
from celery.backends.redis import RedisBackend

from apportion.config.celeryconfig import celery_config
from apportion.config.settings import Settings
from apportion.workers.broker.gate import SENT_AT_HEADER

# The message header with the UNIX time a producer sent the job: the worker measures the
# end-to-end latency from it (apportion_job_end_to_end_seconds). Optional; producers in
# other languages may set it too (examples/node-producer does).
__all__ = ["SENT_AT_HEADER", "ProducerResultBackend", "producer_app", "sent_now"]


class ProducerResultBackend(RedisBackend):  # type: ignore[misc]
    """Celery's Redis result backend, listening for a result only when it is asked for.

    Celery's backend subscribes to a task's result channel as the task is sent, and
    unsubscribes when the result is dropped: two commands and their CPU on every send,
    for producers that mostly never wait (``apportion submit`` without ``--wait``, a
    service that reads the result streams). ``AsyncResult.get()`` subscribes by itself
    and then reads the stored result, so an answer stored before it asks is found all
    the same (tests/integration/test_worker_end_to_end.py).
    """

    def on_task_call(self, producer: Any, task_id: str) -> None:
        return None


# Celery's form for a backend class of one's own on a backend URL: "<class>+<url>".
_PRODUCER_BACKEND = f"{__name__}:ProducerResultBackend"


def producer_app(settings: Settings) -> Celery:
    app = Celery("apportion", set_as_current=False)
    conf = celery_config(settings)
    if conf["result_backend"].startswith(("redis://", "rediss://")):
        conf["result_backend"] = f"{_PRODUCER_BACKEND}+{conf['result_backend']}"
    app.config_from_object(conf)
    return app


def sent_now() -> dict[str, Any]:
    """The headers to send with a job now."""
    return {SENT_AT_HEADER: time.time()}
