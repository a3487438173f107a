"""The anchor of the worker benchmark: a no-op task on plain Celery, nothing of apportion.

``celery -A bench.stock_app worker -c 2 -Q stock`` with ``BENCH_STOCK_REDIS_URL`` set: kombu's
stock Redis transport and Celery's stock Redis result backend, configured as a team
would write it for jobs that must not be lost (JSON only, acks_late, prefetch 1) and
nothing else: Celery's defaults for events, track_started and time limits.
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery

URL = os.environ.get("BENCH_STOCK_REDIS_URL", "redis://127.0.0.1:6379/1")

app = Celery("stock", broker=URL, backend=URL, set_as_current=False)
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    task_default_queue="stock",
    worker_hijack_root_logger=False,
)


@app.task(name="stock.noop")
def noop(job: Any) -> dict[str, Any]:
    """Accept the same argument as a partition job, do nothing, return a small result."""
    return {"status": "ok"}
