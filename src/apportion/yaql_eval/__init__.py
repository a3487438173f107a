"""Bounded yaql evaluation: a batch of named expressions against one data document.

Used by the partition engine (``yaql=…`` values in a dynamic schema) and meant to be
reused by the selection engine's ``expression`` module, so the API is general::

    result = evaluate_batch({"schema[3].size": "$.ram * 2"}, hardware, limits)
    result.raise_if_failed()          # Rejected naming every failing path
    result.values["schema[3].size"]   # -> 4096

Every expression is bounded in four ways:

* **length** — ``limits.yaql_max_expression_length``, checked before parsing;
* **iterations** — yaql's own ``yaql.limitIterators`` (``limits.yaql_max_iterations``):
  a collection longer than that raises ``CollectionTooLargeException`` at once;
* **memory** — yaql's ``yaql.memoryQuota`` (``limits.yaql_memory_quota``) for what
  yaql checks itself, *and* an OS limit (``RLIMIT_AS``: the worker's current address
  space plus ``limits.yaql_max_memory_mib``) for everything it does not;
* **wall time** — ``limits.yaql_timeout_seconds`` for the whole batch.

Cost: one fork per batch, not per expression, and only for expressions that are not
proven cheap (:mod:`.budget`: those run in-process, with the same results; so do those
written only in what the direct evaluation knows and proven bounded for it, unless it
declines, see :mod:`.direct`). A fork costs a few milliseconds in a worker with numpy,
scipy and pydantic loaded (the page tables, then the child's first copy-on-write faults
and the pipe), more than evaluating a typical schema's expressions. A child that
reported everything is not waited for (its exit tears down a copy of the address
space); it is reaped at the next batch. Identical expressions in one batch are
evaluated once. Alternatives considered: a long-lived evaluator process would save the
fork but needs a restart protocol after every kill and must be sent the data; a fresh
``subprocess`` pays ~100 ms to import yaql; a thread cannot be killed.

The routes, each a module of this package: :mod:`.inprocess` (with :mod:`.direct`) for
what :mod:`.budget` proves cheap, :mod:`.child` for the rest; :func:`route` below
chooses. :mod:`.parse` parses and checks, :mod:`.records` is the line both routes
answer in, :mod:`.reads` what an expression reads.

POSIX only (``os.fork``); the worker runs on Linux.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apportion.limits import Limits
from apportion.yaql_eval.budget import DataShape, is_cheap, is_direct, shape_of
from apportion.yaql_eval.child import evaluate_in_child, load_prctl
from apportion.yaql_eval.inprocess import evaluate_here
from apportion.yaql_eval.parse import (
    ERROR,
    ITERATIONS,
    MEMORY,
    NOT_DATA,
    SYNTAX,
    TIMEOUT,
    TOO_LONG,
    BatchResult,
    YaqlFailure,
    parse_or_fail,
    root_context,
    syntax_failure,
    warm_up,
)
from apportion.yaql_eval.reads import data_paths

HERE = "here"  # proven cheap for yaql: evaluated in-process (directly where possible)
DIRECT = "direct"  # proven cheap for the direct evaluation only: in-process if it answers
CHILD = "child"  # anything else: the forked, killable child


def route(statement: Any, shape: DataShape) -> str:
    """Where ``statement`` is evaluated on data of ``shape``: HERE, DIRECT or CHILD."""
    if is_cheap(statement, shape):
        return HERE
    if is_direct(statement, shape):
        return DIRECT
    return CHILD


def _evaluate(
    parsed: list[tuple[str, Any]], data: Any, limits: Limits, timeout: float
) -> list[tuple[dict[str, Any], list[YaqlFailure]]]:
    """Cheap expressions here, the rest in one child: (values, failures) of each part."""
    if not parsed:
        return []
    shape = shape_of(data)
    routes = {text: route(tree, shape) for text, tree in parsed}
    parts = []
    declined: set[str] = set()
    here = [(text, tree) for text, tree in parsed if routes[text] != CHILD]
    if here:
        direct_only = frozenset(text for text, _ in here if routes[text] == DIRECT)
        values, failures, declined = evaluate_here(here, data, limits, direct_only=direct_only)
        parts.append((values, failures))
    there = [(text, tree) for text, tree in parsed if routes[text] == CHILD or text in declined]
    if there:
        root_context()  # build before forking so every child inherits it warm
        load_prctl()
        parts.append(evaluate_in_child(there, data, limits, timeout))
    return parts


def evaluate_batch(
    expressions: Mapping[str, str],
    data: Any,
    limits: Limits,
    *,
    timeout_seconds: float | None = None,
) -> BatchResult:
    """Evaluate each named expression with ``$`` bound to ``data`` (plain JSON data).

    Names are caller-chosen labels, typically JSON paths (``schema[3].size``); they come
    back as the keys of ``values`` and the ``name`` of failures. Results are JSON data:
    numbers, strings, booleans, None, lists and dicts. Raises nothing on bad
    expressions: they are reported as failures. Identical expressions are evaluated
    once (yaql without the clock is deterministic: same text, same data, same value)
    — a schema often repeats one disk selection for several spaces, and yaql costs
    ~0.2 ms per element it iterates.

    ``timeout_seconds`` is the wall time of the whole batch (default
    ``limits.yaql_timeout_seconds``); a caller evaluating many expressions may grant a
    larger, still bounded, budget.
    """
    timeout = limits.yaql_timeout_seconds if timeout_seconds is None else timeout_seconds
    failures: list[YaqlFailure] = []
    names_of: dict[str, list[str]] = {}
    for name, text in expressions.items():
        names_of.setdefault(text, []).append(name)
    parsed: list[tuple[str, Any]] = []
    for text, names in names_of.items():
        outcome = parse_or_fail(names[0], text, limits)
        if isinstance(outcome, YaqlFailure):
            failures.extend(YaqlFailure(n, outcome.code, outcome.message) for n in names)
        else:
            parsed.append((text, outcome))
    values: dict[str, Any] = {}
    for by_text, late in _evaluate(parsed, data, limits, timeout):
        for text, value in by_text.items():
            for name in names_of[text]:
                values[name] = value
        for failure in late:
            failures.extend(
                YaqlFailure(n, failure.code, failure.message) for n in names_of[failure.name]
            )
    order = {name: i for i, name in enumerate(expressions)}
    failures.sort(key=lambda f: order[f.name])
    return BatchResult(values=values, failures=tuple(failures))


__all__ = [
    "ERROR",
    "ITERATIONS",
    "MEMORY",
    "NOT_DATA",
    "SYNTAX",
    "TIMEOUT",
    "TOO_LONG",
    "BatchResult",
    "YaqlFailure",
    "data_paths",
    "evaluate_batch",
    "syntax_failure",
    "warm_up",
]
