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

from apportion.config.celeryconfig import celery_config
from apportion.config.settings import Settings
from apportion.workers.broker.gate import SENT_AT_HEADER

# The message header with the UNIX time a producer sent the job: the worker measures the
# end-to-end latency from it (apportion_job_end_to_end_seconds). Optional; producers in
# other languages may set it too (examples/node-producer does).
__all__ = ["SENT_AT_HEADER", "producer_app", "sent_now"]


def producer_app(settings: Settings) -> Celery:
    app = Celery("apportion", set_as_current=False)
    app.config_from_object(celery_config(settings))
    return app


def sent_now() -> dict[str, Any]:
    """The headers to send with a job now."""
    return {SENT_AT_HEADER: time.time()}
