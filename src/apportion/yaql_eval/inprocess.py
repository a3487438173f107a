"""The in-process route: expressions proven cheap, evaluated here, directly where the
direct evaluation answers, else by yaql; the same lines as the child would send."""

from __future__ import annotations

from typing import Any

from yaql.language import exceptions as yaql_exceptions

from apportion.limits import Limits
from apportion.yaql_eval.direct import plain_line
from apportion.yaql_eval.parse import YaqlFailure
from apportion.yaql_eval.records import (
    data_context,
    read_records,
    result_line,
    within_budget,
)

# What a cheap expression's evaluation may raise as its own failure; anything else (a
# worker's soft time limit, KeyboardInterrupt) is not the expression's fault and goes up.
_EVALUATION_ERRORS: tuple[type[BaseException], ...] = (
    yaql_exceptions.YaqlException,
    ArithmeticError,
    LookupError,
    TypeError,
    ValueError,
    AttributeError,
    RecursionError,
    StopIteration,
    MemoryError,
    AssertionError,
)


def evaluate_here(
    parsed: list[tuple[str, Any]], data: Any, limits: Limits, *, direct_only: frozenset[str]
) -> tuple[dict[str, Any], list[YaqlFailure], set[str]]:
    """Expressions proven cheap (:mod:`.budget`), evaluated in this
    process, and the names of those left to the child.

    The same evaluation and the same JSON lines as in the child, so the values and
    failures are the ones the child would report. An expression named in
    ``direct_only`` is proven cheap for the direct evaluation only: when that declines,
    yaql would not be bounded here, and it goes to the child.
    """
    context = None
    budget = limits.max_payload_bytes
    lines = []
    kept: list[tuple[str, Any]] = []
    declined: set[str] = set()
    for name, expression in parsed:
        index = len(kept)
        line = plain_line(index, expression, data, limits.yaql_max_iterations)
        if line is None:
            if name in direct_only:
                declined.add(name)
                continue
            context = context or data_context(data)
            line = result_line(index, expression, context, limits, _EVALUATION_ERRORS)
        line, budget = within_budget(index, line, budget)
        lines.append(line.encode())
        kept.append((name, expression))
    values, failures, _ = read_records(lines, kept)
    return values, failures, declined
