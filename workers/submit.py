"""Send jobs by task name and wait for their envelopes: the broker side of ``apportion submit``.

The CLI command reads and checks the jobs and prints what comes back; everything that
talks to Redis through Celery is here, so the ``apportion`` package itself imports no
broker library. A failure a user can act on is raised as :class:`SubmitFailed` with its
message phrased for them (the location without its password, never a traceback).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeout
from kombu.exceptions import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from apportion.config.settings import Settings
from apportion.workers.producer import JobSender, producer_app
from apportion.workers.redis.client import error_text, redact_url, refusal

Step = Callable[[str], None]


class SubmitFailed(Exception):
    """Jobs could not be sent or their answers not read; the message says why."""


def send(
    settings: Settings,
    task_name: str,
    jobs: Sequence[Any],
    *,
    connect_retries: int,
    timeout: float,
    step: Step,
) -> list[Any]:
    """Send each job to ``task_name``: their ``AsyncResult`` handles, in order."""
    app = producer_app(settings)
    # Waiting for answers must not outlast ``timeout`` when Redis goes away meanwhile:
    # the result backend's reconnection gives up after about as many seconds.
    backend_options = app.conf.result_backend_transport_options
    policy = dict(backend_options.get("retry_policy") or {})
    policy["max_retries"] = max(1, min(int(policy.get("max_retries", 20)), int(timeout)))
    app.conf.result_backend_transport_options = {**backend_options, "retry_policy": policy}
    results: list[Any] = []
    try:
        # Fail fast and clearly when Redis is down, instead of Celery's long retry loops.
        with app.connection_for_write() as conn:
            conn.ensure_connection(
                max_retries=connect_retries,
                interval_start=0.2,
                interval_step=0.5,
                interval_max=1.0,
            )
        with JobSender(app) as sender:
            for job in jobs:
                results.append(sender.send(task_name, job))
                step("sent")
    except (OperationalError, OSError, RuntimeError, ResponseError) as exc:
        why = refusal(exc)
        if why is not None:
            raise SubmitFailed(
                f"Redis at {redact_url(settings.broker)} answered but refused the job(s): "
                f"{why}; {len(results)} of {len(jobs)} sent"
            ) from None
        if isinstance(exc, ResponseError):
            raise
        raise SubmitFailed(
            f"cannot reach the broker at {redact_url(settings.broker)}: {error_text(exc)}"
        ) from None
    return results


def wait(results: Sequence[Any], timeout: float, step: Step, settings: Settings) -> list[Any]:
    """Each result's envelope, in order; ``timeout`` bounds the wait for each next one."""
    envelopes: list[Any] = []
    try:
        for r in results:
            envelopes.append(r.get(timeout=timeout, propagate=True))
            step("answered")
    except CeleryTimeout:
        raise SubmitFailed(
            f"no result within {timeout:g} s ({len(envelopes)} of {len(results)} answered); "
            "is a worker running on the queue? (apportion health)"
        ) from None
    except (OperationalError, RedisConnectionError, OSError, ResponseError) as exc:
        why = refusal(exc)
        if why is not None:
            raise SubmitFailed(
                f"Redis at {redact_url(settings.backend)} answered but refused to serve the "
                f"results: {why}"
            ) from None
        if isinstance(exc, ResponseError):
            raise SubmitFailed(f"task failed: {type(exc).__name__}: {exc}") from None
        raise SubmitFailed(_backend_lost(settings, error_text(exc))) from None
    except RuntimeError as exc:  # Celery's "Retry limit exceeded … result store backend"
        raise SubmitFailed(_backend_lost(settings, " ".join(str(exc).split()))) from None
    except Exception as exc:  # the task itself failed (e.g. retries exhausted)
        raise SubmitFailed(f"task failed: {type(exc).__name__}: {exc}") from None
    return envelopes


def _backend_lost(settings: Settings, reason: str) -> str:
    return f"lost the result backend at {redact_url(settings.backend)}: {reason}"
