"""Worker logs: one line per job at INFO, payloads only at DEBUG, JSON on request.

Celery logs two INFO lines per task of its own, ``Task … received`` (with the
arguments' repr) and ``Task … succeeded in …: <return value repr>`` (fragments of the
job and of the envelope). At INFO they are dropped in favour of apportion's single
line per job (workers/observe.py: job id, kind, status, error code, times); at DEBUG
they are kept, with the job's payload.

They are dropped by raising the level of the two loggers that write them to WARNING,
not by a filter: Celery checks those loggers' level once, when it builds a task's
strategy and tracer, and then skips the lines altogether, where a filter would only
discard each line after Celery made it (two log records a job, a busy worker's CPU).
The only other INFO line of those loggers is Celery's ``retry:`` line, which goes with
them; apportion logs every retry itself, at WARNING (tasks/jobs.py). Every other
Celery line is left alone.

``APPORTION_LOG_CELERY_TASK_LINES=true`` keeps Celery's two lines at INFO too, as
stock Celery writes them (for tooling that reads them).

``APPORTION_LOG_FORMAT=json`` writes each record as one JSON object (time, level,
logger, message, process, and a job line's fields as keys of their own), for log
shippers; the default ``text`` keeps Celery's format.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from typing import Any

from celery.app.trace import LOG_RECEIVED, LOG_SUCCESS
from celery.signals import after_setup_logger, after_setup_task_logger

from apportion.codec import encode_text

# The attribute a record's structured fields travel in (logging's `extra=`).
FIELDS = "apportion"
_PER_JOB_LINES = (LOG_RECEIVED, LOG_SUCCESS)
# Loggers that write Celery's two lines per task (celery.worker.strategy, celery.app.trace).
_PER_JOB_LOGGERS = ("celery.worker.strategy", "celery.app.trace")


class JsonFormatter(logging.Formatter):
    """One JSON object per record; a job line's fields are top-level keys."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.processName,
            "pid": record.process,
        }
        fields = getattr(record, FIELDS, None)
        if isinstance(fields, dict):
            out.update(fields)
        if record.exc_info:
            out["exc_info"] = self.formatException(record.exc_info)
        return encode_text(out)


class DropPerJobLines(logging.Filter):
    """Drops Celery's per-task INFO lines (apportion writes one line per job instead).

    For records that reach a handler some other way (a logger level set by hand): the
    loggers are normally quiet at INFO already (see the module doc)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno == logging.INFO and record.msg in _PER_JOB_LINES)


_DROP = DropPerJobLines()


def log_format() -> str:
    # Read from the environment directly: logging is set up before the settings are
    # read. An unknown value logs as text here; the settings then refuse it at start-up
    # with the choices.
    return os.environ.get("APPORTION_LOG_FORMAT", "text").strip().lower()


def celery_task_lines() -> bool:
    return os.environ.get("APPORTION_LOG_CELERY_TASK_LINES", "").strip().lower() in _TRUE


_TRUE = ("1", "true", "yes", "on")


def configure(logger: logging.Logger, loglevel: int) -> None:
    """Apply apportion's choices to a logger Celery just set up."""
    if log_format() == "json":
        for handler in logger.handlers:
            handler.setFormatter(JsonFormatter())
    for name in _PER_JOB_LOGGERS:
        per_job = logging.getLogger(name)
        if loglevel > logging.DEBUG and not celery_task_lines():
            per_job.setLevel(max(loglevel, logging.WARNING))
            per_job.addFilter(_DROP)
        else:
            per_job.setLevel(logging.NOTSET)
            per_job.removeFilter(_DROP)


def _on_setup(logger: logging.Logger | None = None, loglevel: int | None = None, **_: Any) -> None:
    if logger is not None:
        configure(logger, loglevel or logging.INFO)


after_setup_logger.connect(_on_setup, weak=False)
after_setup_task_logger.connect(_on_setup, weak=False)
