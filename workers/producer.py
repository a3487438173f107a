"""The producer side of the Celery app: the production configuration, no tasks.

Producers send by task name (``apportion.partition``), so they need the routes,
serializers and retry policy of :func:`apportion.config.celeryconfig.celery_config`
but none of the task code: ``apportion submit`` and ``apportion health`` use this app
instead of :mod:`apportion.workers.app`, which imports every engine (numpy, scipy,
yaql) to register the tasks, seconds of start-up a producer has no use for.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from typing import Any

import orjson
from celery import Celery
from celery.backends.redis import RedisBackend
from celery.result import AsyncResult
from kombu import Producer
from kombu.serialization import register
from kombu.utils import json as kombu_json

from apportion.config.celeryconfig import celery_config
from apportion.config.settings import Settings
from apportion.workers.broker.gate import SENT_AT_HEADER

# The message header with the UNIX time a producer sent the job: the worker measures the
# end-to-end latency from it (apportion_job_end_to_end_seconds). Optional; producers in
# other languages may set it too (examples/node-producer does).
__all__ = [
    "SENT_AT_HEADER",
    "JobSender",
    "ProducerResultBackend",
    "args_preview",
    "producer_app",
    "sent_now",
]

# Celery's own bound on a task's argsrepr (task_protocol 2, ``argsrepr_maxsize``); the
# gate cuts a longer one to the same length.
PREVIEW_MAX = 1024
# A string value longer than this is shown by its start in the preview.
_STRING_MAX = 64


class ProducerResultBackend(RedisBackend):  # type: ignore[misc]
    """Celery's Redis result backend, listening for a result only when it is asked for.

    Celery's backend subscribes to a task's result channel as the task is sent, and
    unsubscribes when the result is dropped: two commands and their CPU on every send,
    for producers that mostly never wait (``apportion submit`` without ``--wait``, a
    service that reads the result streams). ``AsyncResult.get()`` subscribes by itself
    and then reads the stored result, so an answer stored before it asks is found all
    the same (tests/integration/test_worker_end_to_end.py).
    """

    def on_task_call(self, producer: Any, task_id: str) -> None:
        return None


# kombu's serializer of a call whose job :meth:`JobSender.send` was told is plain JSON
# data (its ``plain``): the job is written by orjson, not by kombu's encoder (the
# standard library's, with a Python ``default`` hook), which costs a big job several
# times more (bench/worker.md). Same content type: the message is what kombu's ``json``
# serializer sends, as text. Registering it makes it kombu's name for application/json
# too (kombu then writes, e.g., a reply with it): anything but a plain call is written by
# kombu's encoder, as before.
PLAIN_SERIALIZER = "apportion-plain-json"


def _dumps(body: Any) -> str:
    """Celery's ``(args, kwargs, embed)`` as JSON: through orjson when its job is a
    plain job already written (an ``orjson.Fragment``), otherwise by kombu's encoder
    (kombu also asks the serializer of a content type for other data, e.g. a reply)."""
    if (
        isinstance(body, tuple | list)
        and len(body) == 3
        and isinstance(body[0], tuple | list)
        and all(isinstance(arg, orjson.Fragment) for arg in body[0])
    ):
        return orjson.dumps(body).decode()
    text: str = kombu_json.dumps(body)
    return text


# Only the encoder: decoding application/json stays whatever the process registered.
register(PLAIN_SERIALIZER, _dumps, None, content_type="application/json", content_encoding="utf-8")

# Celery's form for a backend class of one's own on a backend URL: "<class>+<url>".
_PRODUCER_BACKEND = f"{__name__}:ProducerResultBackend"


def producer_app(settings: Settings) -> Celery:
    app = Celery("apportion", set_as_current=False)
    conf = celery_config(settings)
    if conf["result_backend"].startswith(("redis://", "rediss://")):
        conf["result_backend"] = f"{_PRODUCER_BACKEND}+{conf['result_backend']}"
    app.config_from_object(conf)
    return app


def sent_now() -> dict[str, Any]:
    """The headers to send with a job now."""
    return {SENT_AT_HEADER: time.time()}


# orjson writes integers of at most 64 bits; a larger one is shown as its digits.
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


def _shown(value: Any) -> Any:
    if type(value) is int and not _INT_MIN <= value <= _INT_MAX:
        return str(value)
    if isinstance(value, dict):
        return f"{{{len(value)} keys}}"
    if isinstance(value, list | tuple):
        return f"[{len(value)} items]"
    if isinstance(value, str) and len(value) > _STRING_MAX:
        return value[: _STRING_MAX - 1] + "…"
    return value


def args_preview(job: Any) -> str:
    """What Flower and the worker's log show as a job's arguments (its ``argsrepr``).

    The job's top level as JSON, each container given by its size (``"[3 items]"``),
    long strings by their start, at most 1,024 characters: what tells one job from
    another at a glance, at a cost that grows with the job's top-level keys only, not
    with what they hold. Celery's default
    walks the arguments three levels deep with its ``saferepr`` on every send, in
    Python, for a text that only logs and Flower read; the whole job is in the body.
    """
    if isinstance(job, dict):
        top: Any = {str(k): _shown(v) for k, v in job.items()}
    else:
        top = _shown(job)
    try:
        text = orjson.dumps([top]).decode()
    except (TypeError, orjson.JSONEncodeError):  # not JSON data: a plain repr of its type
        text = f"[<{type(job).__name__}>]"
    return text if len(text) <= PREVIEW_MAX else text[: PREVIEW_MAX - 1] + "…"


class JobSender:
    """Sends jobs by task name as ``apportion submit`` does, on one producer held for
    all of them (``with JobSender(app) as sender: sender.send(name, job)``).

    What a send costs the producer's CPU is what a service enqueuing many jobs pays on
    every job, so each send leaves out what Celery would redo for nothing:

    * the producer and its channel are taken from the pool once, not once a send;
    * no declaration (``declare=()``): a job goes to its queue's list directly (a
      direct route is sent on kombu's default exchange, the list named after the
      queue), so declaring the queue adds nothing to delivery; workers declare their
      queues as they consume. Celery would otherwise re-check kombu's declared-entities
      cache on every send, copying the queue and its exchange each time;
    * ``argsrepr`` from :func:`args_preview` and an empty ``kwargsrepr``, instead of a
      repr of the whole job walked by Celery's ``saferepr``.

    Declaring is left out only when every queue of the app is on a direct exchange
    (apportion's configuration); with any other exchange a queue's binding is what
    routes the message, and Celery declares as usual. Retries on a lost connection are
    Celery's, as for any ``send_task``. A held sender holds one broker connection from
    the app's pool and, like a kombu producer, is for one thread at a time.
    """

    def __init__(self, app: Celery) -> None:
        self.app = app
        self.producer: Producer | None = None  # None: one taken from the pool per send
        self._held: AbstractContextManager[Producer] | None = None
        direct = all(q.exchange.type == "direct" for q in app.amqp.queues.values())
        self.declare: tuple[()] | None = () if direct else None

    def __enter__(self) -> JobSender:
        if self._held is not None:
            raise RuntimeError("this JobSender already holds a producer")
        held = self.app.producer_or_acquire()
        self.producer = held.__enter__()
        self._held = held
        return self

    def __exit__(self, *exc: Any) -> None:
        held, self._held, self.producer = self._held, None, None
        if held is not None:
            held.__exit__(*exc)

    def send(self, task_name: str, job: Any, *, plain: bool = False) -> AsyncResult:
        """Send ``job`` to ``task_name``. ``plain``: the caller knows ``job`` holds only
        what decoding JSON text with orjson gives (str keys, finite floats, integers
        within 64 bits; ``apportion.edge_fast.fast_decode``'s values), so orjson writes
        the body, and the worker decodes the same job. Without it kombu's encoder does,
        which writes NaN and Python types that orjson would write differently."""
        options = {"serializer": PLAIN_SERIALIZER} if plain else {}
        return self.app.send_task(
            task_name,
            args=[orjson.Fragment(orjson.dumps(job))] if plain else [job],
            headers=sent_now(),
            argsrepr=args_preview(job),
            kwargsrepr="{}",
            declare=self.declare,
            producer=self.producer,
            **options,
        )
