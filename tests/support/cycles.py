"""What a job leaves for the cyclic collector, measured as ``apportion solve`` runs it."""

from __future__ import annotations

import gc
from typing import Any

from apportion.cli.solve import collector_paused
from apportion.engine import Context, run


def cycles_left(kind: str, payload: Any, context: Context) -> tuple[str, int]:
    """The job's status and how many unreachable objects its run left for the collector.

    The job runs once first, so that lazy imports and caches are not counted as its own;
    the counted run has the collector paused, as ``solve`` runs every job.
    """
    run(kind, payload, context)
    gc.collect()
    with collector_paused():
        envelope = run(kind, payload, context)
        status = envelope.status
        del envelope
    return status, gc.collect()
