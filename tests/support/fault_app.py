"""The production app plus faults a test switches on: ``celery -A tests.support.fault_app``.

Everything is the production configuration (apportion.workers.app.create_app); on top:

* ``apportion.test.crash`` kills its own pool child with SIGKILL, as the kernel's OOM
  killer or a segfault in native code would;
* ``apportion.test.sleep`` sleeps its argument's ``seconds`` (a job to kill a worker under);
* ``APPORTION_TEST_SLOW_SOLVE=S``: every job sleeps S seconds in its pool child before
  it is solved (a job longer than its time limit);
* ``APPORTION_TEST_SLOW_STORE=S``: a pool child sleeps S seconds before it stores a
  SUCCESS in the result backend, after the job's event is published (a slow Redis at
  the worst moment for a time limit);
* ``APPORTION_TEST_LOOP_WATCH=1``: the main process's event loop logs ``the event loop
  was held for S s`` whenever it went more than :data:`LOOP_HELD` seconds without a
  turn (it fires the time limits: held, they fire late).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from typing import Any

from celery import bootsteps, states
from celery.backends.base import BaseKeyValueStoreBackend

from apportion.tasks import jobs
from apportion.workers.app import create_app

app = create_app()
_MAIN = os.getpid()
_REQUEST = "apportion.workers.broker.requests:GatedRequest"


@app.task(name="apportion.test.crash", queue="partition", Request=_REQUEST)
def crash(job: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@app.task(name="apportion.test.sleep", queue="partition", Request=_REQUEST)
def sleep(job: Any) -> dict[str, Any]:
    time.sleep(float(job["seconds"]))
    return {"slept": job["seconds"]}


_SLOW_SOLVE = float(os.environ.get("APPORTION_TEST_SLOW_SOLVE", "0"))
_SLOW_STORE = float(os.environ.get("APPORTION_TEST_SLOW_STORE", "0"))

if _SLOW_SOLVE:
    _solve = jobs._solve

    def _slow_solve(*args: Any, **kwargs: Any) -> Any:
        time.sleep(_SLOW_SOLVE)
        return _solve(*args, **kwargs)

    jobs._solve = _slow_solve

if _SLOW_STORE:
    _store = BaseKeyValueStoreBackend._store_result

    def _slow_store(self: Any, task_id: str, result: Any, state: str, *a: Any, **kw: Any) -> Any:
        if state == states.SUCCESS and os.getpid() != _MAIN:
            time.sleep(_SLOW_STORE)
        return _store(self, task_id, result, state, *a, **kw)

    BaseKeyValueStoreBackend._store_result = _slow_store  # type: ignore[method-assign]


LOOP_HELD = 1.0


class _LoopWatch(bootsteps.StartStopStep):  # type: ignore[misc]  # celery is untyped
    requires = ("celery.worker.components:Hub",)

    def start(self, worker: Any) -> None:
        hub = getattr(worker, "hub", None)
        if hub is None:
            return
        log = logging.getLogger("apportion.test")
        last = [time.monotonic()]

        def turn() -> None:
            now = time.monotonic()
            if now - last[0] > LOOP_HELD:
                log.warning("the event loop was held for %.1f s", now - last[0])
            last[0] = now

        hub.call_repeatedly(0.1, turn)


if os.environ.get("APPORTION_TEST_LOOP_WATCH"):
    app.steps["worker"].add(_LoopWatch)
