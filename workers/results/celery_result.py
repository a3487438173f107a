"""A job's result in Celery's Redis result backend, written with its event.

Celery's backend stores a task's result with a read (is a final state stored already?)
and a MULTI/SETEX/PUBLISH/EXEC: two round trips from the pool child after the event's
own. apportion's tasks do not let Celery store their answers (``ignore_result``,
tasks/jobs.py); the event's script writes the same key with the same value and expiry
and publishes it on the same channel, as Celery's backend does, in the event's round
trip (workers/results/publisher.py). Producers read it as before:
``AsyncResult.get()`` on Celery's backend, which subscribes to that channel and reads
that key.

Only where that is exactly what Celery would store: the backend is Celery's Redis
backend on the Redis the events go to, the result is not extended, and the task is a
plain one (not part of a group or sent by another task, whose results carry more).
Everywhere else — and for a job_id answered before, whose answer is only known after
the script ran — the task stores its answer through Celery's backend (``mark_as_done``).
Errors and retries are stored by Celery as always (``store_errors_even_if_ignored``).

The stored value is Celery's ``_get_result_meta`` for a successful task plus its
``task_id``: tests/unit/service/test_celery_result_canary.py compares the two, and reads
the value back through Celery's backend.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from celery.backends.redis import RedisBackend

from apportion.workers.results.publisher import ResultRecord


def success_value(task_id: str, envelope_json: bytes, now: datetime | None = None) -> bytes:
    """The JSON Celery's Redis backend stores for a task that returned ``envelope_json``."""
    # An ISO date is plain ASCII: quoted as it is, it is what json.dumps writes.
    date_done = (now or datetime.now(UTC)).isoformat().encode()
    return b"".join(
        (
            b'{"status": "SUCCESS", "result": ',
            envelope_json,
            b', "traceback": null, "children": [], "date_done": "',
            date_done,
            b'", "task_id": ',
            json.dumps(task_id).encode(),
            b"}",
        )
    )


# The attribute a task keeps whether its backend and app settings allow the record in:
# they are fixed for a worker's life, and reading Celery's settings costs more than the
# rest of this check.
_FITS = "_apportion_result_record_fits"


def _backend_fits(task: Any) -> bool:
    fits = getattr(task, _FITS, None)
    if fits is None:
        fits = isinstance(task.backend, RedisBackend) and not task.app.conf.result_extended
        setattr(task, _FITS, fits)
    return bool(fits)


def can_record(task: Any, same_redis: bool, request: Any = None) -> bool:
    """Whether the event's script may store ``task``'s result (module doc).

    ``request``: ``task.request``, when the caller has it already."""
    if request is None:
        request = task.request
    return (
        same_redis
        and _backend_fits(task)
        and bool(request.id)
        and not request.is_eager
        and not getattr(request, "group", None)
        and not getattr(request, "parent_id", None)
        and not getattr(request, "chord", None)
    )


def success_record(task: Any, envelope_json: bytes, ttl: int, request: Any = None) -> ResultRecord:
    backend: RedisBackend = task.backend
    task_id = (task.request if request is None else request).id
    key = backend.get_key_for_task(task_id)
    return ResultRecord(
        key=key.decode() if isinstance(key, bytes) else str(key),
        value=success_value(task_id, envelope_json),
        ttl=ttl,
    )
