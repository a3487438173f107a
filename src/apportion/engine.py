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

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from apportion import ENGINE_VERSION, edge, kinds, unknown_fields
from apportion.context import Context, PolicyLookup, StoredPolicy
from apportion.contracts import Envelope, ErrorDetail, ErrorInfo, WarningDetail
from apportion.contracts.base import valid_job_id, written_loc
from apportion.contracts.policy import UNION_TAG_ERRORS
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


# An engine returns its result as plain JSON data (dicts, lists, str, int, float, bool,
# None), or as a pydantic model that is dumped here.
Solver = Callable[[Any, Context], BaseModel | dict[str, Any]]


def parse_json_text(text: str | bytes, limits: Limits = DEFAULT_LIMITS) -> Any:
    """Decode a job from JSON text: size limit, no NaN/Infinity, no duplicate keys."""
    return edge.loads(text, limits)


def _problems(exc: ValidationError, model: type[BaseModel]) -> list[Problem]:
    out = []
    schema = model.__pydantic_core_schema__
    for err in exc.errors(include_url=False, include_input=False):
        loc = written_loc(schema, err["loc"])  # without union branches
        if loc[:1] == ["policy"] and err["type"] in UNION_TAG_ERRORS:
            loc.append("module")  # the tag a policy module is chosen by
        out.append(Problem(json_path(loc), err["msg"]))
    return out


def validate(
    kind: str, payload: Any, limits: Limits = DEFAULT_LIMITS, *, vouched: bool = False
) -> BaseModel:
    """Validate ``payload`` against the contract model of ``kind`` or raise :class:`Rejected`.

    ``vouched``: the payload was just decoded by :func:`apportion.edge.load_bounded` and
    its bounds vouch for its shape under ``limits``, so the shape walk would find nothing.
    """
    model = kinds.get(kind).job
    if not isinstance(payload, dict):
        raise Rejected.at("$", f"a {kind} job must be a JSON object, got {type(payload).__name__}")
    found = None if vouched else edge.shape_problem(payload, limits)
    if found is not None:
        raise found.rejected()
    try:
        job: BaseModel = model.model_validate(payload)
        return job
    except ValidationError as exc:
        raise Rejected.of(_problems(exc, model)) from None
    except RecursionError:
        raise Rejected.at("$", "job nested too deeply") from None


def error_info(exc: DomainError) -> ErrorInfo:
    """The envelope's ``error`` for a domain error: its code, message and every problem."""
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
        if valid_job_id(value):
            return value
    return None


@dataclass(slots=True)
class _Attempt:
    """What the envelope reports whatever happens: the job's id and its warnings."""

    job_id: str | None
    warnings: Sequence[WarningDetail] = ()


def _answer(
    spec: kinds.JobKind,
    payload: Any,
    ctx: Context,
    attempt: _Attempt,
    vouched: bool,
    decoded: bool,
) -> Any:
    """Decode, validate, check and solve: the result as plain data, or a domain error.

    The kind's check runs after the unknown-field check, so that a strict job with an
    unknown field is refused for that field first, whatever else is wrong with it.
    """
    if not decoded and isinstance(payload, str | bytes):
        payload, bounds = edge.load_bounded(payload, ctx.limits)
        vouched = bounds is not None and bounds.vouch(ctx.limits)
        attempt.job_id = _payload_job_id(spec, payload) or attempt.job_id
    try:
        job = validate(spec.name, payload, ctx.limits, vouched=vouched)
    except Rejected as exc:
        # A misspelled field may be why a required one is missing: say so too.
        if exc.code == Rejected.code:
            attempt.warnings = unknown_fields.find(spec.job, payload)
        raise
    found = unknown_fields.find(spec.job, payload)
    if found and _strict(job, ctx):
        raise unknown_fields.rejection(found, by_default="strict" not in job.model_fields_set)
    attempt.warnings = found
    checked = spec.checked(job, ctx.limits)
    solve: Solver = spec.load_solver()
    answer = solve(checked, ctx)
    # Dumped here, inside the caller's try: a result the engine built from odd input
    # must not escape as an exception either.
    return answer.model_dump(mode="json") if isinstance(answer, BaseModel) else answer


def _strict(job: BaseModel, ctx: Context) -> bool:
    """Whether unknown fields reject ``job``: its own ``strict`` if it set one, else the
    deployment's default (Context.unknown_fields)."""
    if "strict" in job.model_fields_set:
        return getattr(job, "strict", False) is True
    return ctx.unknown_fields == "reject"


def _internal_error(kind: str, exc: Exception) -> ErrorInfo:
    return ErrorInfo(
        code="internal_error",
        message=f"the {kind} engine could not process this job "
        f"({type(exc).__name__}: {str(exc)[:200]})",
    )


def run(
    kind: str,
    payload: Any,
    ctx: Context | None = None,
    *,
    job_id: str | None = None,
    reraise: tuple[type[BaseException], ...] = (),
    vouched: bool = False,
    decoded: bool = False,
) -> Envelope:
    """Validate, solve and wrap one job. Raises only :class:`~apportion.kinds.UnknownKind`
    and ``reraise``.

    ``payload`` is the job as data, or as JSON text (``str`` or ``bytes``) for a Python
    caller that has the text. ``decoded``: the payload is a value already decoded from
    JSON (the CLI's input, a task's argument), so a string is a JSON string, which is
    no job (``invalid_job``), never text to decode a second time.

    ``job_id`` is the fallback idempotency key (the Celery task id) used when the
    job carries none. ``reraise`` lets the caller keep exceptions that are its own
    business, such as Celery's soft time limit, out of the engine-bug branch.
    ``vouched``: see :func:`validate` (a caller that decoded the text itself).
    """
    spec = kinds.get(kind)
    passthrough: tuple[type[BaseException], ...] = (InfrastructureError, *reraise)
    started = time.perf_counter()
    attempt = _Attempt(_payload_job_id(spec, payload) or job_id)

    def envelope(**fields: Any) -> Envelope:
        elapsed = (time.perf_counter() - started) * 1000.0
        return Envelope(
            job_id=attempt.job_id,
            kind=kind,
            engine_version=ENGINE_VERSION,
            elapsed_ms=round(elapsed, 3),
            warnings=attempt.warnings,
            **fields,
        )

    try:
        result = _answer(spec, payload, ctx or Context(), attempt, vouched, decoded)
    except Infeasible as exc:
        return envelope(status="infeasible", error=error_info(exc))
    except DomainError as exc:  # Rejected and every other domain error
        return envelope(status="rejected", error=error_info(exc))
    except passthrough:
        raise  # a store the worker injected failed: the task retries, nothing is answered
    except Exception as exc:  # an engine bug on this input; see module docstring
        log.exception("engine %s failed on job %s", kind, attempt.job_id)
        return envelope(status="rejected", error=_internal_error(kind, exc))
    return envelope(status="ok", result=result)


__all__ = [
    "Context",
    "PolicyLookup",
    "StoredPolicy",
    "error_info",
    "parse_json_text",
    "run",
    "validate",
]
