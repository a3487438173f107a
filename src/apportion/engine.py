"""The one entry point every caller uses: ``run(kind, payload) -> Envelope``.

The CLI's ``solve``, the Celery tasks and the benchmarks all go through here, so
validation, limits, timing and the mapping of outcomes to envelope statuses are
decided in one place:

* pydantic ``ValidationError`` and :class:`~apportion.errors.Rejected` → ``rejected``
  with every problem's JSON path;
* :class:`~apportion.errors.Infeasible` → ``infeasible``;
* any other exception raised by an engine is a bug that a particular input
  triggered. It is deterministic (retrying gives the same crash), so it becomes
  ``rejected`` with code ``internal_error`` and a one-line message — never a
  stack trace on the wire, never a dead worker. The caller logs the traceback.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ValidationError

from apportion import ENGINE_VERSION, kinds
from apportion.contracts import Envelope, ErrorDetail, ErrorInfo
from apportion.contracts.policy import user_loc
from apportion.errors import (
    DomainError,
    Infeasible,
    InfrastructureError,
    Problem,
    Rejected,
    json_path,
)
from apportion.limits import DEFAULT_LIMITS, Limits

log = logging.getLogger("apportion.engine")


# (accounts, window_hours) -> {account: failures in the window}
FailureCounts = Callable[[Sequence[str], float], Mapping[str, int]]
# (event) -> True when the event was recorded now, False when its event_id was known
RecordOutcome = Callable[[Any], bool]


@dataclass(frozen=True, slots=True)
class Context:
    """What an engine may know besides the job: limits, the clock, configured defaults.

    Passing these in (rather than reading a clock or settings inside an engine) keeps
    every engine a pure function of its inputs.
    """

    limits: Limits = DEFAULT_LIMITS
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    # launch_select: the policy a job without a `policy` key gets (config/default_policy.yaml).
    default_policy: Sequence[Mapping[str, Any]] | None = None
    # launch_select: failures per account within the last `window_hours`, for jobs that
    # leave `failures` null. Injected by the worker (the Redis failure-history store) so
    # the engine itself stays free of I/O; None means no history is available.
    failure_counts: FailureCounts | None = None
    # launch_outcome: records one event in the failure-history store, returning whether
    # it was new (False for a repeated event_id). Injected by the worker, like the above.
    record_outcome: RecordOutcome | None = None


# An engine returns its result as plain JSON data (dicts, lists, str, int, float, bool,
# None), or as a pydantic model that is dumped here.
Solver = Callable[[Any, Context], BaseModel | dict[str, Any]]


def parse_json_text(text: str | bytes, limits: Limits = DEFAULT_LIMITS) -> Any:
    """Decode a job from JSON text, enforcing the payload limit and refusing NaN/Infinity."""
    size = len(text)
    if size > limits.max_payload_bytes:
        raise Rejected.at(
            "$",
            f"payload of {size} bytes exceeds the limit of {limits.max_payload_bytes} bytes",
            code="too_large",
        )

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    try:
        return json.loads(text, parse_constant=no_constants)
    except RecursionError:
        raise Rejected.at("$", "JSON nested too deeply", code="malformed_json") from None
    except ValueError as exc:
        raise Rejected.at("$", f"not valid JSON: {exc}", code="malformed_json") from None


def _problems(exc: ValidationError) -> list[Problem]:
    out = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = list(err["loc"])
        if loc[:1] == ["policy"]:  # tagged union: report where the user wrote it
            loc = ["policy", *user_loc(loc[1:], err["type"])]
        out.append(Problem(json_path(loc), err["msg"]))
    return out


def _longest_key(value: dict[Any, Any]) -> int:
    try:
        return max(map(len, value))  # JSON keys are strings: one C-level pass
    except TypeError:  # a Python caller's non-string key
        return max(len(k) if isinstance(k, str) else 0 for k in value)


def _shape_ok(payload: Any, max_depth: int, max_string: int) -> bool:
    """The cheap pass: no paths built, only "is anything too deep or too long?".

    Decoded JSON holds exact dicts, lists and strs, so ``type(x) is`` checks suffice and
    keep this at a fraction of pydantic's own cost on a large job.
    """
    if type(payload) is not dict and type(payload) is not list:
        return not (type(payload) is str and len(payload) > max_string)
    stack: list[tuple[Any, int]] = [(payload, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        value, depth = pop()
        if depth >= max_depth:
            return False
        if type(value) is dict:
            if value and _longest_key(value) > max_string:
                return False
            children: Any = value.values()
        else:
            children = value
        for child in children:
            kind = type(child)
            if kind is str:
                if len(child) > max_string:
                    return False
            elif kind is dict or kind is list:
                push((child, depth + 1))
    return True


def shape_problem(payload: Any, limits: Limits) -> Problem | None:
    """The first value nested deeper than allowed or string longer than allowed.

    Iterative walks (no recursion, so no RecursionError on hostile nesting) before
    pydantic sees the job: limits that hold for every kind, whatever its model. The
    paths are only built, in a second walk, when the cheap first walk found a problem.
    """
    if _shape_ok(payload, limits.max_json_depth, limits.max_string_length):
        return None
    stack: list[tuple[Any, str, int]] = [(payload, "$", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            if len(value) > limits.max_string_length:
                return Problem(
                    path,
                    f"a string of {len(value)} characters exceeds the limit "
                    f"of {limits.max_string_length}",
                )
            continue
        if isinstance(value, dict):
            items: Any = value.items()
        elif isinstance(value, list):
            items = enumerate(value)
        else:
            continue
        if depth >= limits.max_json_depth:
            return Problem(path, f"nested deeper than {limits.max_json_depth} levels")
        for key, child in items:
            if isinstance(key, str) and len(key) > limits.max_string_length:
                return Problem(
                    path,
                    f"a key of {len(key)} characters exceeds the limit "
                    f"of {limits.max_string_length}",
                )
            child_path = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"
            stack.append((child, child_path.removeprefix("$."), depth + 1))
    return None


def validate(kind: str, payload: Any, limits: Limits = DEFAULT_LIMITS) -> BaseModel:
    """Validate ``payload`` against the contract model of ``kind`` or raise :class:`Rejected`."""
    model = kinds.get(kind).job
    if not isinstance(payload, dict):
        raise Rejected.at("$", f"a {kind} job must be a JSON object, got {type(payload).__name__}")
    problem = shape_problem(payload, limits)
    if problem is not None:
        raise Rejected(f"{problem.path}: {problem.message}", [problem], code="too_large")
    try:
        job: BaseModel = model.model_validate(payload)
        return job
    except ValidationError as exc:
        raise Rejected.of(_problems(exc)) from None
    except RecursionError:
        raise Rejected.at("$", "job nested too deeply") from None


def _error(exc: DomainError) -> ErrorInfo:
    problems: Sequence[Problem] = getattr(exc, "problems", ())
    return ErrorInfo(
        code=exc.code,
        message=exc.message,
        details=[ErrorDetail(path=p.path, message=p.message) for p in problems],
    )


def _payload_job_id(spec: kinds.JobKind, payload: Any) -> str | None:
    """The idempotency key a payload carries: its job_id (an event's event_id)."""
    if isinstance(payload, dict):
        value = payload.get(spec.id_field)
        if isinstance(value, str) and 0 < len(value) <= 256:
            return value
    return None


def run(
    kind: str,
    payload: Any,
    ctx: Context | None = None,
    *,
    job_id: str | None = None,
    reraise: tuple[type[BaseException], ...] = (),
) -> Envelope:
    """Validate, solve and wrap one job. Raises only :class:`~apportion.kinds.UnknownKind`
    and ``reraise``.

    ``job_id`` is the fallback idempotency key (the Celery task id) used when the
    job carries none. ``reraise`` lets the caller keep exceptions that are its own
    business, such as Celery's soft time limit, out of the engine-bug branch.
    """
    spec = kinds.get(kind)
    solve: Solver = spec.load_solver()
    ctx = ctx or Context()
    passthrough: tuple[type[BaseException], ...] = (InfrastructureError, *reraise)
    started = time.perf_counter()
    resolved_id = _payload_job_id(spec, payload) or job_id

    def envelope(**fields: Any) -> Envelope:
        elapsed = (time.perf_counter() - started) * 1000.0
        return Envelope(
            job_id=resolved_id,
            kind=kind,
            engine_version=ENGINE_VERSION,
            elapsed_ms=round(elapsed, 3),
            **fields,
        )

    try:
        if isinstance(payload, str | bytes):
            payload = parse_json_text(payload, ctx.limits)
            resolved_id = _payload_job_id(spec, payload) or job_id
        job = validate(kind, payload, ctx.limits)
        # Serialising inside the try: a result the engine built from odd input must not
        # escape as an exception either.
        answer = solve(job, ctx)
        result = answer.model_dump(mode="json") if isinstance(answer, BaseModel) else answer
    except Rejected as exc:
        return envelope(status="rejected", error=_error(exc))
    except Infeasible as exc:
        return envelope(status="infeasible", error=_error(exc))
    except DomainError as exc:
        return envelope(status="rejected", error=_error(exc))
    except passthrough:
        raise  # a store the worker injected failed: the task retries, nothing is answered
    except Exception as exc:  # an engine bug on this input; see module docstring
        log.exception("engine %s failed on job %s", kind, resolved_id)
        return envelope(
            status="rejected",
            error=ErrorInfo(
                code="internal_error",
                message=f"the {kind} engine could not process this job "
                f"({type(exc).__name__}: {str(exc)[:200]})",
            ),
        )
    return envelope(status="ok", result=result)


__all__ = ["Context", "parse_json_text", "run", "validate"]
