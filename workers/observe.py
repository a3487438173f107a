"""What a worker tells operators about each job: one log line, metrics, Flower's text.

* **One line per job at INFO** (logger ``apportion.jobs``): job id, kind, status, the
  error code and message when not ok, engine, task and end-to-end times, the task id
  (what Flower lists). The payload only at DEBUG. Celery's own two lines per task are
  dropped at INFO (workers/logs.py).
* **Metrics** when enabled (workers/metrics/jobs.py).
* **Flower** shows a task's state from Celery's events and, as its result, the text of
  the ``task-succeeded`` event: Celery's ``repr`` of the return value, cut at
  ``resultrepr_maxsize``. A task returns an :class:`Answer`: the envelope itself for
  the result backend (kombu's JSON encoder writes ``__json__()``, so the stored value
  and ``AsyncResult.get()`` are the envelope, unchanged) whose repr is a short
  preview led by the envelope's status: ``REJECTED invalid_job: schema[0].size: …``.
  A rejected job is therefore visibly rejected in Flower (list, detail, search
  ``result:REJECTED``), while its Celery state stays SUCCESS: the task did its work,
  the answer is the rejection, and a FAILURE state would break producers'
  ``get()`` and make Celery's own retry and error handling treat an answer as a crash.

All of it runs from Celery's ``task_prerun``/``task_postrun`` signals, so the tasks
stay thin.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Mapping
from typing import Any

from celery.signals import task_postrun, task_prerun

from apportion.codec import encode_text
from apportion.workers.broker.gate import SENT_AT_HEADER
from apportion.workers.logs import FIELDS
from apportion.workers.metrics import jobs as job_metrics

log = logging.getLogger("apportion.jobs")

PREVIEW_MAX = 200
PAYLOAD_LOG_MAX = 4096


def preview(envelope: Mapping[str, Any]) -> str:
    """A one-line summary of an envelope, status first (Flower's result column)."""
    status = str(envelope.get("status", "?")).upper()
    job = f"job {envelope.get('job_id')}"
    elapsed = envelope.get("elapsed_ms")
    timing = f", {elapsed:.1f} ms" if isinstance(elapsed, int | float) else ""
    error = envelope.get("error")
    if isinstance(error, Mapping):
        text = f"{status} {error.get('code')}: {error.get('message')} ({job}{timing})"
    else:
        result = envelope.get("result")
        fields = ", ".join(result) if isinstance(result, Mapping) else ""
        warnings = envelope.get("warnings") or ()
        note = f", {len(warnings)} warnings" if warnings else ""
        text = f"{status} ({job}{timing}{note}) result: {fields}"
    return text if len(text) <= PREVIEW_MAX else text[: PREVIEW_MAX - 1] + "…"


class Answer:
    """A job task's return value: the envelope, written as JSON; its repr a preview."""

    __slots__ = ("envelope",)

    def __init__(self, envelope: dict[str, Any]) -> None:
        self.envelope = envelope

    def __json__(self) -> dict[str, Any]:
        return self.envelope

    def __repr__(self) -> str:
        return preview(self.envelope)


_started: dict[str, float] = {}


def _apportion_task(task: Any) -> bool:
    return str(getattr(task, "name", "")).startswith("apportion.")


def _on_prerun(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    if task_id is not None and _apportion_task(task):
        _started[task_id] = time.monotonic()


def sent_at(request: Any) -> float | None:
    value = getattr(request, SENT_AT_HEADER, None)
    if value is None and isinstance(getattr(request, "headers", None), Mapping):
        value = request.headers.get(SENT_AT_HEADER)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _on_postrun(
    task_id: str | None = None, task: Any = None, retval: Any = None, args: Any = None, **_: Any
) -> None:
    started = _started.pop(task_id or "", None)
    if not isinstance(retval, Answer):
        return  # retried or requeued: the task logged why, Celery logs the rest
    now = time.time()
    sent = sent_at(getattr(task, "request", None))
    job_line(retval.envelope, task_id, started, sent, now)
    if args and log.isEnabledFor(logging.DEBUG):
        log.debug(
            "job %s payload: %s",
            retval.envelope.get("job_id"),
            encode_text(args[0])[:PAYLOAD_LOG_MAX],
        )
    metrics = job_metrics.current()
    if metrics is not None:
        metrics.record(retval.envelope, sent, now)


def job_line(
    envelope: Mapping[str, Any],
    task_id: str | None,
    started: float | None,
    sent: float | None,
    now: float,
) -> None:
    # Runs once per job in the pool child, whose CPU per job bounds a worker's jobs/s: it
    # does nothing when the line is off, and logs with Logger.makeRecord and
    # Logger.handle, what Logger.info does after asking logging's findCaller for the
    # caller's file, line and function: known here, where findCaller walks the stack.
    if not log.isEnabledFor(logging.INFO):
        return
    task_ms = None if started is None else round((time.monotonic() - started) * 1000, 3)
    end_to_end_ms = None if sent is None else round((now - sent) * 1000, 3)
    engine_ms = envelope.get("elapsed_ms")
    error = envelope.get("error") or {}
    warnings = len(envelope.get("warnings") or ())
    fields: dict[str, Any] = {
        "job_id": envelope.get("job_id"),
        "kind": envelope.get("kind"),
        "status": envelope.get("status"),
        "code": error.get("code"),
        "engine_ms": engine_ms,
        "task_ms": task_ms,
        "end_to_end_ms": end_to_end_ms,
        "warnings": warnings,
        "task_id": task_id,
    }
    times = []
    if isinstance(engine_ms, _NUMBER):
        times.append(f"engine {engine_ms:.1f} ms")
    if task_ms is not None:
        times.append(f"task {task_ms:.1f} ms")
    if end_to_end_ms is not None:
        times.append(f"end-to-end {end_to_end_ms:.1f} ms")
    why = f" {error.get('code')}: {str(error.get('message'))[:300]}" if error else ""
    more = f", {warnings} warnings" if warnings else ""
    log.handle(
        log.makeRecord(
            log.name,
            logging.INFO,
            _JOB_LINE_FILE,
            getattr(inspect.currentframe(), "f_lineno", 0),  # this line, not stored: no cycle
            _JOB_LINE,
            (
                fields["job_id"],
                fields["kind"],
                fields["status"],
                why,
                ", ".join(times),
                more,
                task_id,
            ),
            None,
            "job_line",
            {FIELDS: fields},
        )
    )


_JOB_LINE = "job %s %s %s%s (%s%s) task %s"
_JOB_LINE_FILE = job_line.__code__.co_filename
_NUMBER = (int, float)


task_prerun.connect(_on_prerun, weak=False)
task_postrun.connect(_on_postrun, weak=False)
