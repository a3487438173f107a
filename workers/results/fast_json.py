"""kombu's JSON decoder, replaced by orjson wherever the two give the same data.

Every JSON text Celery decodes goes through kombu's serializer registry: a job's body in
the pool child, a result in ``AsyncResult.get()`` (``apportion submit --wait``). kombu
decodes with the standard library and an ``object_hook`` that calls back into Python
for every JSON object, to turn ``{"__type__": …, "__value__": …}`` objects back into
the Python types kombu's encoder wrote them for. A big job or a big answer holds tens
of thousands of objects: that hook costs more than the parsing itself, and kombu's
decoding of a launch_select answer with thousands of candidates was the largest
single step of a caller's wait.

:func:`install` registers :func:`loads` for ``application/json`` through kombu's
public ``register`` (the encoder stays kombu's). It answers as kombu's does:

* a text that mentions ``"__type__"`` anywhere (even inside a string) is decoded by
  kombu, hook and all;
* a text orjson refuses and the standard library accepts (``NaN``, ``Infinity``, lone
  surrogates) is decoded by kombu too, and so is a text that may hold an integer
  beyond 64 bits (orjson would make it a float without a word): it reaches the task
  exactly as before (where the engine rejects what it must, with its path);
* everything else is plain JSON, which both decode to equal values.

orjson refuses ``NaN``, infinities and numbers too large for a float: a value it
decoded holds no NaN or infinity anywhere. :func:`take_finite` tells a task whether
its job is (part of) the text this thread decoded last, so the job's fingerprint
(workers/results/answers.py) need not look for them again.

The collector is paused while a text is decoded, as ``apportion solve`` pauses it
while reading its input: a decode allocates containers that all stay alive and hold
no cycle, and the collections they trigger walk them again and again and free
nothing.
"""

from __future__ import annotations

import threading
from typing import Any

import orjson
from kombu.serialization import register
from kombu.utils import json as kombu_json

from apportion.collector import collector_paused
from apportion.edge_fast import may_hold_long_integer

CONTENT_TYPE = "application/json"
_MARKER = "__type__"


def loads(data: str | bytes | bytearray | memoryview) -> Any:
    """``data`` decoded as kombu's JSON decoder decodes it (module doc)."""
    if isinstance(data, memoryview | bytearray):
        data = bytes(data)
    text = data if isinstance(data, bytes) else data.encode()
    plain = _MARKER.encode() not in text and not may_hold_long_integer(text)
    _last.value = None
    with collector_paused():
        if plain:
            try:
                value = orjson.loads(data)
            except orjson.JSONDecodeError:
                pass
            else:
                _last.value = value
                return value
        return kombu_json.loads(data)


# The value this thread's last :func:`loads` got from orjson (None after kombu's decode).
_last = threading.local()


def take_finite(value: Any) -> bool:
    """Whether ``value`` is the value this thread decoded last with orjson, or one of
    the arguments of that Celery message body (``[args, kwargs, embed]``): then it holds
    no NaN and no infinity. Forgets that value, which is then freed with its job."""
    last = getattr(_last, "value", None)
    _last.value = None
    if last is None:
        return False
    if value is last:
        return True
    args = last[0] if isinstance(last, list) and last else None
    return isinstance(args, list) and any(value is arg for arg in args)


def install() -> None:
    """Decode ``application/json`` with :func:`loads` in this process (idempotent)."""
    register("json", kombu_json.dumps, loads, content_type=CONTENT_TYPE, content_encoding="utf-8")


__all__ = ["install", "loads", "take_finite"]
