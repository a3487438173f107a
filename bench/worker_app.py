"""The production app plus one no-op task, for the worker throughput benchmark only.

``celery -A bench.worker_app worker -Q partition,bench`` runs the real
``apportion.partition`` task next to ``bench.noop`` under the same configuration,
so the two are measured on equal terms.
"""

from __future__ import annotations

from typing import Any

from apportion import kinds
from apportion.config.settings import get_settings
from apportion.workers.app import create_app

app = create_app()
# The partition task's time limits: every production task has a soft and a hard limit,
# and the worker's per-task timer work for them is Celery's cost, not the engine's.
_LIMITS = get_settings().time_limit(kinds.get("partition"))


@app.task(
    name="bench.noop",
    queue="bench",
    soft_time_limit=_LIMITS.soft,
    time_limit=_LIMITS.hard,
)
def noop(job: Any) -> dict[str, Any]:
    """Accept the same argument, do nothing, return a small JSON result."""
    return {"status": "ok"}
