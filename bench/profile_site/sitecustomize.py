"""Thread CPU per job of chosen steps inside a worker's pool children.

Loaded through ``PYTHONPATH`` by ``bench/bench_worker.py profile`` only: when
``BENCH_PROFILE_DIR`` is set, every pool child wraps the functions named in
``BENCH_PROFILE_STEPS`` (``module:attribute`` pairs, comma-separated; attributes may be
``Class.method``) with ``time.thread_time_ns()`` and writes its sums per job to
``BENCH_PROFILE_DIR/child-<pid>.json``. The wrapped steps nest, so each figure includes
the steps inside it. ``cycle`` is the child's CPU from one job's start to the next's:
the whole job as the pool child pays for it (billiard's pipe, unpickling, Celery's
trace, the task).
"""

from __future__ import annotations

import importlib
import json
import os
import time
from typing import Any

_DIR = os.environ.get("BENCH_PROFILE_DIR")


def _install() -> None:
    from celery.signals import worker_process_init, worker_process_shutdown

    clock = time.thread_time_ns
    sums: dict[str, int] = {}
    state = {"jobs": 0, "cycle": 0, "last": -1}

    def wrap(spec: str) -> None:
        module_name, _, attribute = spec.partition(":")
        owner: Any = importlib.import_module(module_name)
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        inner = getattr(owner, name)
        if isinstance(owner, type) and isinstance(owner.__dict__.get(name), staticmethod):
            raise ValueError(f"{spec}: a staticmethod cannot be wrapped here")

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = clock()
            try:
                return inner(*args, **kwargs)
            finally:
                sums[spec] = sums.get(spec, 0) + clock() - started

        setattr(owner, name, timed)

    def write(**_: Any) -> None:
        jobs = state["jobs"]
        report = {
            "pid": os.getpid(),
            "jobs": jobs,
            "cycle_us": state["cycle"] / max(jobs - 1, 1) / 1000,
            "steps_us": {k: v / max(jobs, 1) / 1000 for k, v in sums.items()},
        }
        with open(os.path.join(str(_DIR), f"child-{os.getpid()}.json"), "w") as out:
            json.dump(report, out)

    def setup(**_: Any) -> None:
        import celery.app.trace as trace

        traced = trace.fast_trace_task

        def each_job(*args: Any, **kwargs: Any) -> Any:
            now = clock()
            if state["last"] >= 0:
                state["cycle"] += now - state["last"]
            state["last"] = now
            state["jobs"] += 1
            started = clock()
            try:
                return traced(*args, **kwargs)
            finally:
                sums["celery trace (the whole task)"] = (
                    sums.get("celery trace (the whole task)", 0) + clock() - started
                )
                if state["jobs"] % 250 == 0:
                    write()

        trace.fast_trace_task = each_job
        for spec in filter(None, os.environ.get("BENCH_PROFILE_STEPS", "").split(",")):
            wrap(spec)

    worker_process_init.connect(setup, weak=False)
    worker_process_shutdown.connect(write, weak=False)


if _DIR:
    _install()
