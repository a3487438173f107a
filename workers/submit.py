"""Send jobs by task name and wait for their envelopes: the broker side of ``apportion submit``.

The CLI command reads and checks the jobs and prints what comes back; everything that
talks to Redis through Celery is here, so the ``apportion`` package itself imports no
broker library. A failure a user can act on is raised as :class:`SubmitFailed` with its
message phrased for them (the location without its password, never a traceback).
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Sequence
from contextlib import suppress
from time import monotonic
from typing import Any

import orjson
from celery.exceptions import TimeoutError as CeleryTimeout
from kombu.exceptions import OperationalError
from kombu.serialization import register
from kombu.utils import json as kombu_json
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from apportion.config.settings import Settings
from apportion.edge_fast import may_hold_type_key
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
    plain: bool = False,
) -> list[Any]:
    """Send each job to ``task_name``: their ``AsyncResult`` handles, in order.
    ``started``: when the command started (``time.monotonic()``); connecting must be
    done ``timeout`` seconds after it, loading the libraries included. ``plain``: every
    job is plain JSON data (:meth:`JobSender.send`)."""
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
                    results.append(sender.send(task_name, job, plain=plain))
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


def wait(
    results: Sequence[Any], timeout: float, step: Step, settings: Settings, *, raw: bool = False
) -> list[Any]:
    """Each result's envelope, in order; ``timeout`` bounds the wait for each next one.

    ``raw``: the envelopes are only printed compact (:func:`printable`); one whose JSON in
    the result record prints as it is stored comes back as a :class:`RawEnvelope`."""
    envelopes: list[Any] = []
    if raw:
        register(
            "json",
            kombu_json.dumps,
            _loads_record,
            content_type=fast_json.CONTENT_TYPE,
            content_encoding="utf-8",
        )
    else:
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


class RawEnvelope:
    """An envelope as its result record holds it: compact JSON that decoding and
    encoding again would give back byte for byte (:func:`_stable`), and its status."""

    __slots__ = ("fragment", "status")

    def __init__(self, text: bytes, status: str) -> None:
        self.fragment = orjson.Fragment(text)
        self.status = status

    def get(self, key: str, default: Any = None) -> Any:
        """The envelope's ``status``, as a decoded envelope's ``get`` gives it."""
        return self.status if key == "status" else default


def printable(envelopes: Any) -> Any:
    """``envelopes`` (one, or a list) for :func:`apportion.codec.encode` compact: a
    :class:`RawEnvelope` as the bytes it holds."""
    if isinstance(envelopes, list):
        return [e.fragment if isinstance(e, RawEnvelope) else e for e in envelopes]
    return envelopes.fragment if isinstance(envelopes, RawEnvelope) else envelopes


# A result record as workers/results/celery_result.py writes it (and Celery's backend
# for a successful task): the envelope between this head and the tail.
_RECORD_HEAD = b'{"status": "SUCCESS", "result": '
_RECORD_TAIL = b', "traceback": null, "children": [], "date_done": "'
_TAIL_REST = re.compile(rb'([0-9T:.+-]+)", "task_id": "([^"\\]*)"\}')
# The envelope's first fields, in the contract's order: its status without decoding it.
_STATUS = re.compile(
    rb'\{"job_id":(?:null|"(?:[^"\\]|\\.)*"),"kind":"[a-z_]+","status":"([a-z_]+)"'
)
# A \u escape other than of a control character: the standard library's ASCII-only
# fallback in apportion.codec wrote it, which orjson would write as the character.
_WIDE_ESCAPE = re.compile(rb"\\u(?!00[01])")


def _stable(text: bytes) -> bool:
    """Whether ``text`` (an envelope the worker wrote with :mod:`apportion.codec`) is
    what printing its decoded value compact writes, byte for byte. Conservative: any
    doubt (the same bytes inside a string included) says no, and it is decoded.

    orjson's own output is; the codec's fallback (the standard library) differs in
    ``1e-05``-style floats, ``NaN``/``Infinity`` and ``\\u`` escapes of characters
    orjson writes as they are; Celery's backend writes ``", "`` and ``": "``; kombu
    turns ``__type__`` objects into Python values."""
    # A one-byte search is a memchr, a longer one is not: most envelopes hold no space
    # and no backslash, and the searches behind those two are skipped.
    spaced = b" " in text
    return not (
        (spaced and (b'": ' in text or b", " in text))
        or b"e-0" in text
        or b"NaN" in text
        or b"Infinity" in text
        or may_hold_type_key(text)
        or (b"\\" in text and _WIDE_ESCAPE.search(text) is not None)
    )


def _loads_record(data: str | bytes | bytearray | memoryview) -> Any:
    """A result record decoded for :func:`wait` with ``raw``: a successful one whose
    envelope is :func:`_stable` with that envelope as a :class:`RawEnvelope`, any
    other as :func:`fast_json.loads` decodes it."""
    text = data.encode() if isinstance(data, str) else bytes(data)
    if text.startswith(_RECORD_HEAD):
        at = text.rfind(_RECORD_TAIL)
        tail = _TAIL_REST.fullmatch(text, at + len(_RECORD_TAIL)) if at > 0 else None
        envelope = text[len(_RECORD_HEAD) : at]
        status = _STATUS.match(envelope) if tail is not None else None
        if tail is not None and status is not None and _stable(envelope):
            return {
                "status": "SUCCESS",
                "result": RawEnvelope(envelope, status.group(1).decode()),
                "traceback": None,
                "children": [],
                "date_done": tail.group(1).decode(),
                "task_id": tail.group(2).decode(),
            }
    return fast_json.loads(data)


def _backend_lost(settings: Settings, reason: str) -> str:
    return f"lost the result backend at {redact_url(settings.backend)}: {reason}"
