"""One JSON line per expression: how both the child and this process report a value or
a failure, and how the lines are read back, so both routes answer alike."""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from typing import Any

from yaql.language import exceptions as yaql_exceptions
from yaql.language import utils as yaql_utils

from apportion.edge import reserved_path, too_many_digits
from apportion.limits import Limits, env_name
from apportion.yaql_eval.parse import (
    ERROR,
    ITERATIONS,
    MEMORY,
    NOT_DATA,
    YaqlFailure,
    root_context,
    short,
)


def _to_data(value: Any) -> Any:
    """JSON ``default`` hook: yaql's non-JSON containers become plain data."""
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, _dt.datetime | _dt.date):
        return value.isoformat()
    raise TypeError(f"the result is a {type(value).__name__}, not data")


# Python converts integers of at most 4,300 digits to and from text; its own message
# would advise the user to call sys.set_int_max_str_digits().
LONG_NUMBER = (
    "an integer of more than 4300 digits, far outside the 64-bit range the engines compute in"
)


def classify(exc: BaseException, limits: Limits) -> tuple[str, str]:
    if isinstance(exc, yaql_exceptions.CollectionTooLargeException):
        return ITERATIONS, (
            f"yaql iteration limit exceeded: {short(exc)} (raise {env_name('yaql_max_iterations')})"
        )
    if isinstance(exc, yaql_exceptions.MemoryQuotaExceededException):
        return MEMORY, (
            f"yaql expression exceeded yaql's memory quota (raise {env_name('yaql_memory_quota')})"
        )
    if isinstance(exc, MemoryError):
        return MEMORY, (
            f"yaql expression ran out of its memory allowance of {limits.yaql_max_memory_mib} MiB "
            f"(raise {env_name('yaql_max_memory_mib')})"
        )
    if isinstance(exc, RecursionError):
        return ERROR, "yaql expression recursed too deeply"
    if too_many_digits(exc):
        return ERROR, f"yaql evaluation failed: {LONG_NUMBER}"
    return ERROR, f"yaql evaluation failed: {type(exc).__name__}: {short(exc)}"


def result_line(
    index: int,
    expression: Any,
    context: Any,
    limits: Limits,
    errors: tuple[type[BaseException], ...],
) -> str:
    """One expression's outcome as the JSON line the child sends (value or failure).

    ``errors`` are the exceptions reported as the expression's failure: everything in
    the child, which only evaluates; the evaluation errors in-process, where a worker's
    own signals (a soft time limit, an interrupt) must go on up.
    """
    try:
        # A child context per expression: `let` bindings do not leak between them.
        value = expression.evaluate(context=context.create_child_context())
    except errors as exc:
        code, message = classify(exc, limits)
        return json.dumps({"i": index, "code": code, "e": message})
    try:
        return json.dumps({"i": index, "v": value}, default=_to_data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        if too_many_digits(exc):
            message = f"the result holds {LONG_NUMBER}"
        elif isinstance(exc, ValueError) and "float" in str(exc):
            message = "the result is not a finite number"
        else:
            message = f"the result cannot be returned as data: {short(exc)}"
        return json.dumps({"i": index, "code": NOT_DATA, "e": message})


def within_budget(index: int, line: str, budget: int) -> tuple[str, int]:
    if len(line) + 1 > budget:
        line = json.dumps({"i": index, "code": MEMORY, "e": "the result is too large"})
    return line, budget - (len(line) + 1)


def data_context(data: Any) -> Any:
    context = root_context().create_child_context()
    context["$"] = yaql_utils.convert_input_data(data)
    return context


def read_records(
    lines: list[bytes], parsed: list[tuple[str, Any]]
) -> tuple[dict[str, Any], list[YaqlFailure], int | None]:
    """Values and failures from result lines, and the expression still running, if any."""
    values: dict[str, Any] = {}
    failures: list[YaqlFailure] = []
    running: int | None = None
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            break  # a line cut by the kill
        if "done" in record:
            break
        if "start" in record:
            running = int(record["start"])
            continue
        name = parsed[int(record["i"])][0]
        running = None
        if "v" in record:
            # The lines are json.dumps's: a "__type__" key appears as such in them.
            where = reserved_path(record["v"]) if b'"__type__"' in line else None
            if where is None:
                values[name] = record["v"]
            else:
                at = "" if where == "$" else f" at {where.removeprefix('$')}"
                failures.append(YaqlFailure(name, NOT_DATA, f"the result{at} holds {_RESERVED}"))
        else:
            failures.append(YaqlFailure(name, str(record["code"]), str(record["e"])))
    return values, failures, running


_RESERVED = (
    "an object made of exactly __type__ and __value__, which the message codec reserves "
    "(a client would decode it as a Python object)"
)
