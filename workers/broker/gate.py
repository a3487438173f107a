"""The gate: every queue item is checked before kombu or Celery decode it.

A worker's main process decodes each message (kombu: the item and its base64 body;
Celery: the body's JSON, then pickles the arguments to a pool child). Anything that
raises there raises inside the consumer loop, and a message that kills the main
process is restored and kills the next worker too. So the transport hands every item
it takes off a queue to :func:`inspect` first, which returns one of:

* :class:`Bury` — the item is not a Celery task message this worker can run (not JSON,
  no ``properties``, ``headers`` not an object, a body that is not base64 JSON of
  ``[args, kwargs, embed]``, a content type other than JSON, a task name this worker
  does not have). It goes to the dead-letter stream with its reason and is never
  executed (workers/broker/dead_letters.py).
* :class:`Deliver` — a message safe for kombu and Celery, rebuilt from the item:

  - the body was decoded with its size, nesting depth and number of values bounded
    (``APPORTION_LIMITS__MAX_PAYLOAD_BYTES``, ``__MAX_JSON_DEPTH``, ``__MAX_JSON_ITEMS``)
    and with duplicate keys refused. A body over a limit is **not** handed on: it is
    replaced by an empty call and the message carries the gate's verdict in the
    ``apportion_rejected`` header, which the task answers as a ``rejected`` envelope
    (codes ``too_large``, ``too_deep``, ``duplicate_key``, ``reserved_key``,
    ``expired``), published once like any answer;
  - headers are whitelisted, and those that would override the operator are replaced:
    a producer's ``timelimit`` is dropped (the queue's configured limits apply: a 2 ms
    hard limit would kill the child and lose the answer, a huge one escapes the
    operator's limits), an ``eta`` is capped at ``APPORTION_MAX_ETA_SECONDS`` (a worker
    holds ETA messages in memory), a missing, non-string, over-long or unprintable task
    id is replaced by one derived from the delivery tag (stable across redeliveries),
    ``shadow``, ``ignore_result``, ``group``, stamps and unknown headers are dropped, and
    ``argsrepr``/``kwargsrepr`` are cut to 1,024 characters (they go to logs and
    Flower);
  - ``embed`` (callbacks, errbacks, chain, chord) is emptied: a job message cannot make
    a worker send further tasks;
  - ``expires`` is checked here, not by Celery: an expired job is answered
    ``rejected``/``expired`` instead of being revoked silently (a revoked task leaves a
    REVOKED state in the backend and nothing on the result stream).

Nothing here touches Redis: the transport does the I/O (workers/broker/transport.py).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from apportion import edge, kinds, walk
from apportion.contracts.base import valid_job_id
from apportion.limits import Limits, env_name

# The header carrying the gate's verdict to the task; a producer's own is discarded.
VERDICT_HEADER = "apportion_rejected"
# The UNIX time a producer sent the job (optional): kept when it is a number, for the
# worker's end-to-end latency (workers/observe.py); apportion submit and the Node
# producer send it.
SENT_AT_HEADER = "apportion_sent_at"
# Task ids the gate makes up are stable for a message (its delivery tag), so a
# redelivered message keeps its id, and its answer its idempotency key.
_TASK_IDS = uuid.UUID("5b0f7c1e-2d4a-4f7e-9a51-0c2f1d8e6a13")
_EMPTY_EMBED: dict[str, None] = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
_REPR_MAX = 1024  # Celery's own argsrepr_maxsize
_ID_MAX = 256


@dataclass(frozen=True, slots=True)
class GateRules:
    """What the gate enforces. Built from settings (config/celeryconfig.py)."""

    limits: Limits = field(default_factory=Limits)
    # The whole queue item, base64 body and headers included.
    max_message_bytes: int = 48 * 1024 * 1024
    # Task names this worker runs, with their configured [hard, soft] time limits;
    # None lets every name through (Celery then decides).
    tasks: Mapping[str, Sequence[float | None]] | None = None
    max_eta_seconds: float = 600.0


@dataclass(frozen=True, slots=True)
class Bury:
    """Not a message this worker can run: dead-letter it with ``reason``."""

    reason: str
    detail: str
    tag: str | None = None
    task_id: str | None = None
    task: str | None = None


@dataclass(frozen=True, slots=True)
class Deliver:
    """A message safe to hand to kombu and Celery; ``notes`` says what the gate changed.

    ``call``: the message's body as the gate decoded it (``[args, kwargs, embed]``, what
    kombu's JSON decoder makes of the same text), for the worker not to decode it again;
    None for a rejected message."""

    message: dict[str, Any]
    notes: tuple[str, ...] = ()
    verdict: dict[str, Any] | None = None
    call: list[Any] | None = None


class _Refused(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def inspect(item: str | bytes, rules: GateRules, now: datetime | None = None) -> Bury | Deliver:
    """Decide what happens to one raw queue item (see the module doc). Never raises."""
    tag: str | None = None
    task_id: str | None = None
    task: str | None = None
    try:
        if len(item) > rules.max_message_bytes:
            raise _Refused(
                "too_large",
                f"a message of {len(item)} bytes is over the limit of "
                f"{rules.max_message_bytes} (raise APPORTION_MAX_MESSAGE_BYTES)",
            )
        raw = _outer(item)
        headers = raw.get("headers")
        if isinstance(headers, dict):  # read first: a dead letter names its task if it can
            task_id = _task_id(headers)
            task = _text(headers.get("task"), None)
        properties = _properties(raw)
        tag = properties["delivery_tag"]
        if not isinstance(headers, dict):
            raise _Refused("bad_headers", f"headers must be an object, got {_kind(headers)}")
        return _deliver(raw, properties, headers, rules, now or datetime.now(UTC))
    except _Refused as refused:
        return Bury(refused.reason, refused.detail, tag, task_id, task)
    except Exception as exc:  # a shape this module did not foresee: still never raise
        return Bury("undecodable", f"{type(exc).__name__}: {str(exc)[:200]}", tag, task_id, task)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _short(value: str, limit: int = _ID_MAX) -> bool:
    return len(value) <= limit and value.isprintable()


def _outer(item: str | bytes) -> dict[str, Any]:
    try:
        raw = json.loads(item)
    except (ValueError, RecursionError) as exc:
        raise _Refused("not_json", f"the queue item is not JSON: {str(exc)[:120]}") from None
    if not isinstance(raw, dict):
        raise _Refused("not_a_message", f"the queue item is a JSON {_kind(raw)}, not an object")
    return raw


def _properties(raw: dict[str, Any]) -> dict[str, Any]:
    props = raw.get("properties")
    if not isinstance(props, dict):
        raise _Refused("bad_properties", f"properties must be an object, got {_kind(props)}")
    tag = props.get("delivery_tag")
    info = props.get("delivery_info")
    if not isinstance(tag, str) or not tag or not _short(tag):
        raise _Refused("bad_properties", "properties.delivery_tag must be a short string")
    if not isinstance(info, dict):
        raise _Refused("bad_properties", "properties.delivery_info must be an object")
    if props.get("body_encoding") != "base64":
        raise _Refused("bad_properties", 'properties.body_encoding must be "base64"')
    priority = props.get("priority")
    out: dict[str, Any] = {
        "delivery_tag": tag,
        "delivery_info": {
            "exchange": _text(info.get("exchange"), ""),
            "routing_key": _text(info.get("routing_key"), ""),
        },
        "body_encoding": "base64",
        "delivery_mode": 2,
        "priority": priority if type(priority) is int and 0 <= priority <= 255 else 0,
        "correlation_id": _text(props.get("correlation_id"), None),
        "reply_to": _text(props.get("reply_to"), ""),
    }
    return out


def _text(value: Any, default: Any) -> Any:
    return value if isinstance(value, str) and _short(value) else default


def _task_id(headers: dict[str, Any]) -> str | None:
    value = headers.get("id")
    return value if isinstance(value, str) and valid_job_id(value) else None


def _deliver(
    raw: dict[str, Any],
    properties: dict[str, Any],
    headers: dict[str, Any],
    rules: GateRules,
    now: datetime,
) -> Deliver:
    content_type = raw.get("content-type")
    if content_type != "application/json":
        raise _Refused(
            "content_type", f"content type {str(content_type)[:60]!r}: this worker takes JSON only"
        )
    task = headers.get("task")
    if not isinstance(task, str) or not _short(task):
        raise _Refused("bad_headers", "headers.task must be the task's name")
    if rules.tasks is not None and task not in rules.tasks:
        raise _Refused("unknown_task", f"this worker has no task named {task!r}")
    notes: list[str] = []
    clean = _headers(headers, properties["delivery_tag"], rules, now, notes)
    properties["correlation_id"] = clean["id"]
    body, verdict, call = _body(raw.get("body"), task, rules.limits, notes)
    if verdict is None and "expired_at" in clean:
        verdict = _verdict(
            "expired", f"the job expired at {clean['expired_at']} before a worker took it", "$"
        )
    clean.pop("expired_at", None)
    if verdict is not None:
        clean[VERDICT_HEADER] = verdict
        body = _encode_body([[], {}, dict(_EMPTY_EMBED)])
        call = None
    message = {
        "body": body,
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": clean,
        "properties": properties,
    }
    return Deliver(message, tuple(notes), verdict, call)


def _headers(
    headers: dict[str, Any], tag: str, rules: GateRules, now: datetime, notes: list[str]
) -> dict[str, Any]:
    task_id = _task_id(headers)
    if task_id is None:
        task_id = str(uuid.uuid5(_TASK_IDS, tag))
        notes.append(f"task id {str(headers.get('id'))[:60]!r} replaced by {task_id}")
    retries = headers.get("retries")
    clean: dict[str, Any] = {
        "lang": "py",
        "task": headers["task"],
        "id": task_id,
        "root_id": _text(headers.get("root_id"), task_id),
        "parent_id": _text(headers.get("parent_id"), None),
        "group": None,
        "retries": retries if type(retries) is int and 0 <= retries <= 10_000 else 0,
        # The queue's configured limits apply (see module doc).
        "timelimit": [None, None],
        "argsrepr": _repr(headers.get("argsrepr")),
        "kwargsrepr": _repr(headers.get("kwargsrepr")),
        "origin": _text(headers.get("origin"), None),
        "eta": _eta(headers.get("eta"), now, rules.max_eta_seconds, notes),
        "expires": None,
    }
    if headers.get("redelivered") is True:
        clean["redelivered"] = True
    # When the producer sent it (UNIX seconds): the worker's end-to-end latency metric
    # (workers/observe.py). A number, or nothing.
    sent_at = headers.get(SENT_AT_HEADER)
    if (type(sent_at) is int or type(sent_at) is float) and math.isfinite(sent_at):
        clean[SENT_AT_HEADER] = sent_at
    asked = headers.get("timelimit")
    own = list(rules.tasks[headers["task"]]) if rules.tasks is not None else None
    # Celery's own apply_async and retries send the task's configured limits: no news.
    if own is not None and asked not in (None, [None, None], own):
        notes.append(f"producer time limit {str(asked)[:60]} ignored")
    expires = _when(headers.get("expires"))
    if expires is not None and expires <= now:
        clean["expired_at"] = expires.isoformat()
    return clean


def _repr(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    # For logs and Flower only: a lone surrogate would make the message unreadable to
    # the broker's own JSON decoder (cjson) once it is recorded as unacknowledged.
    return value[:_REPR_MAX].encode("utf-8", "replace").decode("utf-8")


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _eta(value: Any, now: datetime, max_seconds: float, notes: list[str]) -> str | None:
    if value is None:
        return None
    when = _when(value)
    if when is None:
        notes.append(f"unreadable eta {str(value)[:60]!r} dropped")
        return None
    latest = now + timedelta(seconds=max_seconds)
    if when > latest:
        notes.append(f"eta {when.isoformat()} capped at {latest.isoformat()}")
        return latest.isoformat()
    return when.isoformat()


def _encode_body(call: list[Any]) -> str:
    return base64.b64encode(json.dumps(call).encode()).decode("ascii")


def _body(
    encoded: Any, task: str, limits: Limits, notes: list[str]
) -> tuple[str, dict[str, Any] | None, list[Any] | None]:
    """(the body to deliver, the verdict for a body over a limit or None, the body
    decoded when there is no verdict)."""
    if not isinstance(encoded, str):
        raise _Refused("bad_body", f"the body must be a base64 string, got {_kind(encoded)}")
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise _Refused("bad_body", "the body is not base64") from None
    if len(data) > limits.max_payload_bytes:
        return (
            encoded,
            _verdict(
                "too_large",
                f"a job message of {len(data)} bytes is over the limit of "
                f"{limits.max_payload_bytes} bytes (raise {env_name('max_payload_bytes')})",
                "$",
            ),
            None,
        )
    try:
        # NaN and Infinity: a Python producer writes them; the job is answered (the
        # engine's shape walk rejects them with their path), not dead-lettered.
        call, duplicate, bounds = edge.decode(data, allow_constants=True, limits=limits)
    except RecursionError:
        return encoded, _too_deep(limits, "$"), None
    except edge.LongInteger as exc:
        # kombu's decoder would fail on it in the consumer: answered, not handed on.
        problem = exc.rejected().problems[0]
        long_number = _verdict("number_out_of_range", problem.message, _job_path(exc.path))
        job_id = _job_id(exc.value, task) if _is_call(exc.value) else None
        return encoded, ({**long_number, "job_id": job_id} if job_id else long_number), None
    except ValueError as exc:
        raise _Refused("bad_body", f"the body is not UTF-8 JSON: {str(exc)[:120]}") from None
    if not _is_call(call):
        raise _Refused(
            "not_a_task_call", "the body must be the JSON array [args, kwargs, embed] (protocol 2)"
        )
    # The text's bounds vouch for the job two levels inside the call under the job's
    # own rules, stricter than the gate's: then the walk would find nothing.
    vouched = bounds is not None and bounds.vouch(limits, level=2)
    verdict = None if vouched else _bounds(call, limits)
    if verdict is None and duplicate is not None:
        path, key = duplicate
        problem = edge.duplicate_key(_job_path(path), key).problems[0]
        verdict = _verdict("duplicate_key", problem.message, problem.path)
    if verdict is not None:
        job_id = _job_id(call, task)
        return encoded, ({**verdict, "job_id": job_id} if job_id else verdict), None
    if call[2] and call[2] != _EMPTY_EMBED:
        notes.append("callbacks, errbacks, chain and chord removed")
        call = [call[0], call[1], dict(_EMPTY_EMBED)]
        return _encode_body(call), None, call
    return encoded, None, call


def _is_call(call: Any) -> bool:
    """Whether a decoded body is ``[args, kwargs, embed]`` (Celery's protocol 2)."""
    return (
        isinstance(call, list)
        and len(call) == 3
        and isinstance(call[0], list)
        and isinstance(call[1], dict)
        and (call[2] is None or isinstance(call[2], dict))
    )


def answer_id(delivered: Deliver) -> str:
    """The id a delivered message's answer is filed under (its published marker): the
    job's own idempotency key, else the task id, as the task answers it."""
    headers = delivered.message["headers"]
    own = (
        _job_id(delivered.call, headers["task"])
        if delivered.call is not None
        else (delivered.verdict or {}).get("job_id")
    )
    return own if isinstance(own, str) else str(headers["id"])


def _job_id(call: list[Any], task: str) -> str | None:
    """The job's own idempotency key, for the envelope of a job the gate rejects."""
    args, kwargs = call[0], call[1]
    job = args[0] if len(args) == 1 else kwargs.get("job")
    # The kind's own idempotency key (a launch_outcome event's is its event_id), as
    # apportion.engine reads it; a task name no kind has keeps the common job_id.
    kind = kinds.REGISTRY.get(task.removeprefix("apportion."))
    key = kind.id_field if kind is not None else "job_id"
    value = job.get(key) if isinstance(job, dict) else None
    return value if valid_job_id(value) else None


def _job_path(path: str) -> str:
    """A path in the body ``[args, kwargs, embed]`` as a path in the job (args[0])."""
    for prefix in ("$[0][0]", "$[1].job"):
        if path == prefix:
            return "$"  # the job itself
        if path.startswith(prefix + "."):
            return path[len(prefix) + 1 :]
    return path.removeprefix("$")


def _bounds(call: list[Any], limits: Limits) -> dict[str, Any] | None:
    """Depth and value count of the whole call (the job sits two levels down, in a
    wrapper of eight values), and kombu's reserved type markers, by the walk every job
    takes (:mod:`apportion.walk`); strings and numbers are the engine's to name."""
    found = walk.check(call, walk.Rules(limits, outer_depth=2, outer_items=8, values=False))
    if found is None:
        return None
    if found.code == "too_deep":
        return _too_deep(limits, _job_path(found.problem.path))
    if found.code == "too_large":
        return _verdict("too_large", found.problem.message, "$")
    return _verdict(found.code, found.problem.message, _job_path(found.problem.path))


def _too_deep(limits: Limits, path: str) -> dict[str, Any]:
    return _verdict(
        "too_deep",
        f"the job is nested deeper than {limits.max_json_depth} levels "
        f"(raise {env_name('max_json_depth')})",
        path,
    )


def _verdict(code: str, message: str, path: str) -> dict[str, Any]:
    """The rejection the task answers for this message (an ErrorInfo as JSON)."""
    path = path or "$"
    return {
        "code": code,
        "message": f"{path}: {message}",
        "details": [{"path": path, "message": message}],
    }


__all__ = ["VERDICT_HEADER", "Bury", "Deliver", "GateRules", "answer_id", "inspect"]
