"""Send jobs by task name and wait for their envelopes: the broker side of ``apportion submit``.

The CLI command reads and checks the jobs and prints what comes back; everything that
talks to Redis through Celery is here, so the ``apportion`` package itself imports no
broker library. A failure a user can act on is raised as :class:`SubmitFailed` with its
message phrased for them (the location without its password, never a traceback).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from contextlib import suppress
from time import monotonic
from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeout
from kombu.exceptions import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from apportion.config.settings import Settings
from apportion.workers.deadline import DeadlineExceeded, deadline
from apportion.workers.producer import JobSender, producer_app
from apportion.workers.redis.client import error_text, redact_url, refusal
from apportion.workers.results import fast_json

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
    started: float | None = None,
) -> list[Any]:
    """Send each job to ``task_name``: their ``AsyncResult`` handles, in order.
    ``started``: when the command started (``time.monotonic()``); connecting must be
    done ``timeout`` seconds after it, loading the libraries included."""
    budget = timeout if started is None else max(0.5, timeout - (monotonic() - started))
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
        conn = app.connection_for_write()
        try:
            with deadline(budget):
                conn.ensure_connection(
                    max_retries=connect_retries,
                    interval_start=0.2,
                    interval_step=0.5,
                    interval_max=1.0,
                    timeout=budget,
                )
        except DeadlineExceeded:
            # Let go without a word to the server that never answered (kombu's
            # collect), or closing it would wait on it again.
            with suppress(Exception):
                conn.collect()
            raise
        conn.release()
        with JobSender(app) as sender:
            for job in jobs:
                with deadline(timeout):
                    results.append(sender.send(task_name, job))
                step("sent")
    except DeadlineExceeded as exc:
        raise SubmitFailed(
            f"cannot reach the broker at {redact_url(settings.broker)}: {exc}; "
            f"{len(results)} of {len(jobs)} sent"
        ) from None
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


def bound(app: Any, settings: Settings, timeout: float, connect_retries: int) -> None:
    """Make every phase of a command talking to Redis through ``app`` end within about
    ``timeout`` seconds when Redis does not answer (down, stopped, or a partition that
    drops packets without a word): each connection attempt, each reply, and the retries
    of sending and of reading results."""
    conf = app.conf
    per_try = min(settings.redis_socket_timeout, max(0.5, timeout / (connect_retries + 1)))
    connect = min(settings.redis_connect_timeout, per_try)
    conf.broker_transport_options = {
        **conf.broker_transport_options,
        "socket_timeout": per_try,
        "socket_connect_timeout": connect,
    }
    conf.redis_socket_timeout = per_try
    conf.redis_socket_connect_timeout = connect
    # Waiting for answers must not outlast ``timeout`` when Redis goes away meanwhile:
    # the result backend's reconnection gives up after about as many seconds.
    backend_options = conf.result_backend_transport_options
    policy = dict(backend_options.get("retry_policy") or {})
    policy["max_retries"] = max(1, min(int(policy.get("max_retries", 20)), int(timeout)))
    conf.result_backend_transport_options = {**backend_options, "retry_policy": policy}
    send_policy = dict(conf.task_publish_retry_policy or {})
    tries = max(1, int(timeout // max(per_try, 1.0)))
    send_policy["max_retries"] = min(int(send_policy.get("max_retries", 20)), tries)
    conf.task_publish_retry_policy = send_policy
    conf.result_backend_max_retries = min(int(conf.result_backend_max_retries or 15), tries)


def wait(results: Sequence[Any], timeout: float, step: Step, settings: Settings) -> list[Any]:
    """Each result's envelope, in order; ``timeout`` bounds the wait for each next one."""
    envelopes: list[Any] = []
    fast_json.install()  # answers decoded without kombu's per-object hook
    try:
        for r in results:
            # The backend's own reconnections may overrun ``timeout``: bounded here.
            with deadline(timeout + 1.0):
                envelopes.append(r.get(timeout=timeout, propagate=True))
            # Each answer is kept until the command prints them all and ends: frozen, the
            # collector stops walking its (acyclic) objects again in every later pass.
            gc.freeze()
            step("answered")
    except (CeleryTimeout, DeadlineExceeded):
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
