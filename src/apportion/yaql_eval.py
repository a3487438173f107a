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

Why a forked child. yaql's own limits do not bound time: ``range(0, 100000000).len()``
iterates in Python for seconds, and C-level work (``pow(10, pow(10, 8))``, a regex
with catastrophic backtracking) holds the GIL and cannot be interrupted by any
in-process means (signals, ``sys.settrace``, threads): the handler only runs when the
C call returns. The one bound that always works is a separate process the parent can
SIGKILL. So parsing and the length check run in-process (cheap, deterministic, and a
syntax error needs no child), and all of a batch's expressions are then evaluated in
**one** ``os.fork()``-ed child that inherits the already-built yaql engine, context
and parsed expressions (no import or pickling cost), runs under ``RLIMIT_AS`` and
``RLIMIT_CPU`` (a backstop if the parent itself dies; ``PR_SET_PDEATHSIG`` as well),
and streams one JSON line per expression through a pipe. The parent waits on the pipe
with ``select`` until the deadline and then SIGKILLs the child; the last expression the
child announced and did not finish is the one blamed.

Cost: one fork per batch, not per expression, and only for expressions that are not
proven cheap (see "cheap expressions" below: those run in-process, with the same
results; so do those written only in what the direct evaluation knows and proven
bounded for it, unless it declines, see "plain expressions"). A fork costs a few
milliseconds in a worker with numpy, scipy and pydantic loaded (the page tables, then
the child's first copy-on-write faults and the pipe), more than evaluating a typical
schema's expressions. A child that reported everything
is not waited for (its exit tears down a copy of the address space); it is reaped at
the next batch. Identical expressions in one batch are evaluated once. Alternatives
considered: a long-lived evaluator process would save the fork but needs a restart
protocol after every kill and must be sent the data; a fresh ``subprocess`` pays
~100 ms to import yaql; a thread cannot be killed.

POSIX only (``os.fork``); the worker runs on Linux.
"""

from __future__ import annotations

import collections.abc  # noqa: F401  (yaql 3.2 on Python 3.11 needs it imported first)
import contextlib
import ctypes
import datetime as _dt
import json
import math
import os
import resource
import select
import signal
import threading
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import yaql
from yaql.language import exceptions as yaql_exceptions
from yaql.language import expressions
from yaql.language import utils as yaql_utils

from apportion.edge import reserved_path, too_many_digits
from apportion.errors import Problem, Rejected
from apportion.limits import Limits, env_name

# How failures are classified (also the `code` of each failure).
SYNTAX = "syntax"
TOO_LONG = "too_long"
TIMEOUT = "timeout"
MEMORY = "memory"
ITERATIONS = "iterations"
NOT_DATA = "not_data"
ERROR = "error"


@dataclass(frozen=True, slots=True)
class YaqlFailure:
    """One expression that produced no value, with the reason in words."""

    name: str
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class BatchResult:
    """Values of the expressions that succeeded, and the failures.

    A name is in exactly one of ``values`` and ``failures`` — except after a timeout
    or a killed child, when the child's expressions after the blamed one were never
    run and appear in neither (the batch has failed anyway).
    """

    values: Mapping[str, Any]
    failures: tuple[YaqlFailure, ...]

    @property
    def ok(self) -> bool:
        return not self.failures

    def problems(self) -> list[Problem]:
        """The failures as problems of a batch evaluated within ``yaql_timeout_seconds``
        (a time-out names that limit; a caller granting other time words its own)."""
        hint = f" (raise {env_name('yaql_timeout_seconds')})"
        return [
            Problem(f.name, f.message + hint if f.code == TIMEOUT else f.message)
            for f in self.failures
        ]

    def raise_if_failed(self) -> None:
        """Raise :class:`Rejected` listing every failure by its name (a JSON path)."""
        if self.failures:
            raise Rejected.of(self.problems(), code="bad_expression")


# ---- in-process part: engine, context, parsing ---------------------------------------


@lru_cache(maxsize=8)
def _engine(iterations: int, memory_quota: int) -> Any:
    return yaql.YaqlFactory().create(
        options={
            "yaql.limitIterators": iterations,
            "yaql.memoryQuota": memory_quota,
            # As upstream Bareon: sets behave as lists, so results are JSON data.
            "yaql.treatSetsAsLists": True,
            "yaql.convertSetsToLists": True,
        }
    )


@lru_cache(maxsize=1)
def _root_context() -> Any:
    # Building the standard library context costs ~0.1 s; each batch takes a child of it.
    # Without the date/time library: `now()` would read the clock, and engines are pure
    # functions of their input (the same job must give the same answer on redelivery).
    return yaql.create_context(datetime=False)


@lru_cache(maxsize=4096)
def _parse(iterations: int, memory_quota: int, text: str) -> Any:
    # Parsed expressions are immutable trees; caching them makes repeated schemas cheap.
    return _engine(iterations, memory_quota)(text)


def warm_up(limits: Limits) -> None:
    """Build the yaql engine and context now (a worker calls this at boot; optional)."""
    _engine(limits.yaql_max_iterations, limits.yaql_memory_quota)
    _root_context()


def _parse_or_fail(name: str, text: str, limits: Limits) -> Any | YaqlFailure:
    if len(text) > limits.yaql_max_expression_length:
        return YaqlFailure(
            name,
            TOO_LONG,
            f"yaql expression of {len(text)} characters exceeds the limit of "
            f"{limits.yaql_max_expression_length} (raise {env_name('yaql_max_expression_length')})",
        )
    if not text.strip():
        return YaqlFailure(name, SYNTAX, "empty yaql expression")
    try:
        return _parse(limits.yaql_max_iterations, limits.yaql_memory_quota, text)
    except (yaql_exceptions.YaqlParsingException, yaql_exceptions.YaqlLexicalException) as exc:
        return YaqlFailure(name, SYNTAX, f"yaql syntax error: {_short(exc)}")
    except RecursionError:
        return YaqlFailure(name, SYNTAX, "yaql expression nested too deeply")
    except (
        yaql_exceptions.YaqlException,
        ValueError,
        TypeError,
        IndexError,
        KeyError,
        AttributeError,
    ) as exc:
        # ply's parser raises a few plain types on odd input. Deliberately not
        # `Exception`: the worker's soft time limit is an Exception too, and a job cut
        # short by it is not a syntax error in the user's expression.
        return YaqlFailure(name, SYNTAX, f"yaql syntax error: {_short(exc)}")


def syntax_failure(name: str, text: str, limits: Limits) -> YaqlFailure | None:
    """Why ``text`` does not parse (or is too long), without evaluating it; None if it does."""
    found = _parse_or_fail(name, text, limits)
    return found if isinstance(found, YaqlFailure) else None


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


# ---- the child ---------------------------------------------------------------------


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
_LONG_NUMBER = (
    "an integer of more than 4300 digits, far outside the 64-bit range the engines compute in"
)


def _classify(exc: BaseException, limits: Limits) -> tuple[str, str]:
    if isinstance(exc, yaql_exceptions.CollectionTooLargeException):
        return ITERATIONS, (
            f"yaql iteration limit exceeded: {_short(exc)} "
            f"(raise {env_name('yaql_max_iterations')})"
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
        return ERROR, f"yaql evaluation failed: {_LONG_NUMBER}"
    return ERROR, f"yaql evaluation failed: {type(exc).__name__}: {_short(exc)}"


@lru_cache(maxsize=1)
def _prctl() -> Any:
    # Looked up in the parent (~1 ms) so that every child inherits it.
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _child_limits(limits: Limits, timeout: float) -> None:
    prctl = _prctl()
    if prctl is not None:
        # Die with the parent (Linux): a killed worker leaves no evaluator behind.
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    with contextlib.suppress(OSError, ValueError):
        cpu = math.ceil(timeout) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/statm", "rb") as statm:
            current = int(statm.read().split()[0]) * resource.getpagesize()
        allowed = current + limits.yaql_max_memory_mib * 1024 * 1024
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            allowed = min(allowed, hard)
        resource.setrlimit(resource.RLIMIT_AS, (allowed, hard))


def _result_line(
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
        code, message = _classify(exc, limits)
        return json.dumps({"i": index, "code": code, "e": message})
    try:
        return json.dumps({"i": index, "v": value}, default=_to_data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        if too_many_digits(exc):
            message = f"the result holds {_LONG_NUMBER}"
        elif isinstance(exc, ValueError) and "float" in str(exc):
            message = "the result is not a finite number"
        else:
            message = f"the result cannot be returned as data: {_short(exc)}"
        return json.dumps({"i": index, "code": NOT_DATA, "e": message})


def _within_budget(index: int, line: str, budget: int) -> tuple[str, int]:
    if len(line) + 1 > budget:
        line = json.dumps({"i": index, "code": MEMORY, "e": "the result is too large"})
    return line, budget - (len(line) + 1)


def _data_context(data: Any) -> Any:
    context = _root_context().create_child_context()
    context["$"] = yaql_utils.convert_input_data(data)
    return context


def _child_main(
    write_fd: int,
    parsed: list[tuple[str, Any]],
    data: Any,
    limits: Limits,
    budget: int,
    timeout: float,
) -> None:
    """Evaluate every expression, writing one JSON line per event."""

    def emit(line: str) -> None:
        view = memoryview((line + "\n").encode())
        while view:
            view = view[os.write(write_fd, view) :]

    _child_limits(limits, timeout)
    context = _data_context(data)
    for index, (_name, expression) in enumerate(parsed):
        emit(json.dumps({"start": index}))
        line = _result_line(index, expression, context, limits, (BaseException,))
        line, budget = _within_budget(index, line, budget)
        emit(line)
    emit(json.dumps({"done": True}))


def _run_child(
    write_fd: int,
    parsed: list[tuple[str, Any]],
    data: Any,
    limits: Limits,
    budget: int,
    timeout: float,
) -> None:
    code = 0
    try:
        _child_main(write_fd, parsed, data, limits, budget, timeout)
    except BaseException:  # MemoryError while converting the data, a broken pipe, …
        code = 70
    finally:
        os._exit(code)  # never run the parent's atexit handlers or flush its buffers


# ---- cheap expressions: proven bounded, evaluated without a child --------------------
#
# The child exists because nothing in-process can stop an expression that runs away.
# But the expressions a schema actually holds — ``$.ram * 2``, ``$.disks.where($.type =
# "ssd")``, the seed's swap rule — are small, and the fork alone costs more than
# evaluating them. So an expression whose work is proven small and bounded, from its
# parsed form and the shape of the data, is evaluated in-process; everything else still
# goes to the child. An expression is *cheap* when:
#
# * it calls only functions from ``_ALLOWED``, whose cost is linear in the size
#   of their arguments (no ``range``, ``pow``, regexes, string formatting, sorting,
#   user lambdas, or anything reading the clock);
# * no iterating function (``_ITERATING``) appears inside another's arguments,
#   so a lambda runs at most once per element of one collection;
# * it has at most ``_MAX_ARITHMETIC`` arithmetic operators and every number in it
#   and in the data is below 2⁶³, so no number grows past a few hundred digits (big-
#   integer work is what a runaway would spend its time on);
# * the estimated number of yaql calls — those outside lambdas once, those inside an
#   iterating function once per element of the longest collection (doubled for every
#   ``+``/``*``, which can concatenate or repeat collections) — is at most
#   ``_MAX_CALLS`` (yaql spends ~30 µs per call, so a few tens of milliseconds at
#   worst).
#
# Memory stays bounded by yaql's own quota, which yaql checks before it builds a repeated
# string or list. Anything the check cannot prove cheap (unknown node types included)
# is simply not cheap.


_ITERATING = frozenset(
    {"where", "select", "any", "all", "count", "len", "sum", "max", "min", "first", "last"}
    | {"contains", "#operator_in", "isEmpty", "toList", "keys", "values"}
)
_ARITHMETIC = frozenset(
    {"#operator_+", "#operator_-", "#operator_*", "#operator_/", "#operator_mod"}
    | {"#unary_operator_-", "#unary_operator_+"}
)
_GROWING = frozenset({"#operator_+", "#operator_*"})
_ALLOWED = (
    _ITERATING
    | _ARITHMETIC
    | frozenset(
        {"#get_context_data", "#operator_.", "#operator_?.", "#indexer", "#list", "#map"}
        | {"*equal", "*not_equal", "#operator_<", "#operator_>", "#operator_<=", "#operator_>="}
        | {"#operator_and", "#operator_or", "#unary_operator_not", "#operator_->"}
        | {"let", "selectCase", "switchCase", "switch", "get", "int", "float", "round"}
        | {"abs", "bool", "str"}
    )
)
_MAX_ARITHMETIC = 8
_MAX_CALLS = 2_000
# The direct evaluation (below) spends ~1 µs where yaql spends ~30 µs on a call, so the
# same wall-time bound allows it this many.
_MAX_DIRECT_CALLS = 60_000
_MAX_DEPTH = 40
_SMALL = 2**63


@dataclass(frozen=True, slots=True)
class DataShape:
    """What the check needs to know about ``$``: its longest collection, its numbers."""

    longest: int  # elements of the longest list or mapping
    small_numbers: bool  # every number is below 2**63 in magnitude


def shape_of(data: Any) -> DataShape:
    """One iterative pass over JSON data (no recursion, whatever the nesting).

    A container met again (the same object: the selection module's account documents
    share one ``now``) adds nothing new and is not walked twice.
    """
    if not isinstance(data, dict | list):
        return DataShape(0, not _big(data))
    longest, small, stack, seen = 0, True, [data], set()
    while stack:
        container = stack.pop()
        if id(container) in seen:
            continue
        seen.add(id(container))
        longest = max(longest, len(container))
        for value in container.values() if isinstance(container, dict) else container:
            if isinstance(value, dict | list):
                stack.append(value)
            elif (
                small
                and isinstance(value, int | float)
                and not isinstance(value, bool)
                and not abs(value) < _SMALL
            ):
                small = False
    return DataShape(longest, small)


def _big(value: Any) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and not abs(value) < _SMALL
    )


@dataclass(slots=True)
class _Count:
    calls: int = 0  # yaql calls outside any lambda
    per_element: int = 0  # calls inside iterating functions' arguments, per element
    arithmetic: int = 0
    growing: int = 0
    literals: int = 0  # constants: a literal list is at most this long


def is_cheap(statement: Any, shape: DataShape) -> bool:
    """Whether ``statement`` (a parsed expression) is proven cheap on data of ``shape``."""
    calls = _estimated_calls(statement, shape)
    return calls is not None and calls <= _MAX_CALLS


def is_direct(statement: Any, shape: DataShape) -> bool:
    """Whether ``statement`` is proven cheap *for the direct evaluation* on data of
    ``shape``: written only in what :func:`_direct` evaluates, and bounded as
    :func:`is_cheap` bounds yaql, at the direct evaluation's own cost per call."""
    if not _direct_only(statement, 0):
        return False
    calls = _estimated_calls(statement, shape)
    return calls is not None and calls <= _MAX_DIRECT_CALLS


def _estimated_calls(statement: Any, shape: DataShape) -> int | None:
    """The most calls ``statement`` can make on data of ``shape``; None if unbounded."""
    if not shape.small_numbers:
        return None
    count = _Count()
    if not _walk(statement, count, inside=False, depth=0):
        return None
    if count.arithmetic > _MAX_ARITHMETIC:
        return None
    elements = max(shape.longest, count.literals, 1) << count.growing
    return count.calls + count.per_element * elements


def _walk(node: Any, count: _Count, *, inside: bool, depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return False
    if isinstance(node, expressions.Statement):
        return _walk(node.expression, count, inside=inside, depth=depth + 1)
    if isinstance(node, expressions.Constant):  # KeywordConstant included
        count.literals += 1
        value = node.value
        return not isinstance(value, int | float) or isinstance(value, bool) or abs(value) < _SMALL
    if isinstance(node, expressions.Wrap):
        return _walk(node.expr, count, inside=inside, depth=depth + 1)
    if isinstance(node, expressions.MappingRuleExpression):
        return all(
            _walk(part, count, inside=inside, depth=depth + 1)
            for part in (node.source, node.destination)
        )
    if isinstance(node, expressions.Function):
        return _function(node, count, inside=inside, depth=depth)
    return False


def _function(node: expressions.Function, count: _Count, *, inside: bool, depth: int) -> bool:
    name = node.name
    if name not in _ALLOWED:
        return False
    iterating = name in _ITERATING
    if iterating and inside:  # a lambda inside a lambda: elements × elements
        return False
    if inside:
        count.per_element += 1
    else:
        count.calls += 1
    count.arithmetic += name in _ARITHMETIC
    count.growing += name in _GROWING
    return all(_walk(arg, count, inside=inside or iterating, depth=depth + 1) for arg in node.args)


# ---- what an expression reads -------------------------------------------------------


def data_paths(
    text: str, limits: Limits, *, each: bool = False
) -> frozenset[tuple[str, ...]] | None:
    """The key paths under ``$`` that ``text`` reads, when they provably are all it reads.

    ``each=True`` is for ``$.select(SELECTOR)`` over a list: the paths the selector
    reads of each element (None if ``text`` is not of that form).

    ``$.now.hour`` reads ``("now", "hour")``; ``$.now.keys()`` reads ``("now",)``. So
    its value is a function of the data at those paths alone (yaql without the clock
    is deterministic), which lets a caller reuse a result while they are unchanged.
    None when that cannot be proven: a syntax error, ``$`` used other than through keys
    (``$``, ``$.get(…)``, ``$[…]``), another context name (``let`` bindings), or a
    function outside the cheap expressions' set (which read only their arguments).
    A ``$`` rebound inside a lambda or after ``->`` holds a value computed from those
    paths, so its own keys may be listed too, harmlessly.
    """
    tree = _parse_or_fail("", text, limits)
    if isinstance(tree, YaqlFailure):
        return None
    if each:
        tree = _selector(tree)
        if tree is None:
            return None
    paths: set[tuple[str, ...]] = set()
    return frozenset(paths) if _reads(tree, paths, 0) else None


def _selector(statement: Any) -> Any | None:
    """``SELECTOR`` of a parsed ``$.select(SELECTOR)``; None for anything else."""
    node = statement.expression
    if not (type(node) is expressions.BinaryOperator and node.name == "#operator_."):
        return None
    receiver, member = node.args
    if not (type(receiver) is expressions.GetContextValue and receiver.path.value == "$"):
        return None
    if type(member) is not expressions.Function or member.name != "select":
        return None
    return member.args[0] if len(member.args) == 1 else None


def _reads(node: Any, paths: set[tuple[str, ...]], depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return False
    deeper = depth + 1
    if isinstance(node, expressions.Statement):
        return _reads(node.expression, paths, deeper)
    if isinstance(node, expressions.GetContextValue):  # a bare `$`, or `$name`
        return False
    if isinstance(node, expressions.Constant):
        return True
    if isinstance(node, expressions.Wrap):
        return _reads(node.expr, paths, deeper)
    if isinstance(node, expressions.MappingRuleExpression):
        return _reads(node.source, paths, deeper) and _reads(node.destination, paths, deeper)
    if isinstance(node, expressions.Function):
        if node.name not in _ALLOWED or node.name == "let":
            return False
        path = _key_path(node)
        if path is not None:
            paths.add(path)
            return True
        return all(_reads(arg, paths, deeper) for arg in node.args)
    return False


def _key_path(node: Any) -> tuple[str, ...] | None:
    """``("now", "hour")`` for ``$.now.hour``; None for anything but keys under ``$``."""
    keys: list[str] = []
    while (
        isinstance(node, expressions.Function)
        and node.name == "#operator_."
        and type(node.args[1]) is expressions.KeywordConstant
    ):
        keys.append(node.args[1].value)
        node = node.args[0]
    if keys and isinstance(node, expressions.GetContextValue) and node.path.value == "$":
        return tuple(reversed(keys))
    return None


# ---- the parent --------------------------------------------------------------------


def _fork() -> int:
    with warnings.catch_warnings():
        # Python ≥ 3.12 warns about fork() in a process with threads (numpy's BLAS pool);
        # the child only runs pure-Python yaql and takes none of their locks.
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


# Children that reported everything and are exiting on their own. Tearing down a
# forked copy of a worker with scipy loaded takes ~4 ms; instead of waiting for it, the
# next batch reaps them (a finished child is only a zombie until then).
_exiting: set[int] = set()
_exiting_lock = threading.Lock()


def _reap_exited() -> None:
    with _exiting_lock:
        for pid in list(_exiting):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # already reaped by someone else
                done = pid
            if done:
                _exiting.discard(pid)


def _kill_and_reap(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _collect(read_fd: int, pid: int, deadline: float, cap: int) -> tuple[bytes, bool]:
    """Read the child's output until its done line, EOF or the deadline.

    Returns (bytes, timed_out). A child that finished is left to exit by itself;
    any other is SIGKILLed and reaped here.
    """
    chunks: list[bytes] = []
    size = 0
    timed_out = False
    finished = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([read_fd], [], [], remaining)
        if not ready:
            timed_out = True
            break
        chunk = os.read(read_fd, 1 << 16)
        if not chunk:
            break
        size += len(chunk)
        if size > cap:  # cannot happen with a well-behaved child (it budgets its output)
            break
        chunks.append(chunk)
        if b"".join(chunks[-2:]).endswith(_DONE):  # the line may span two reads
            finished = True
            break
    if finished:
        with _exiting_lock:
            _exiting.add(pid)
    else:
        _kill_and_reap(pid)
    return b"".join(chunks), timed_out


_DONE = b'{"done": true}\n'


def _evaluate_in_child(
    parsed: list[tuple[str, Any]], data: Any, limits: Limits, timeout: float
) -> tuple[dict[str, Any], list[YaqlFailure]]:
    cap = limits.max_payload_bytes
    _reap_exited()
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    try:
        pid = _fork()
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    if pid == 0:  # pragma: no cover - runs in the child, which never returns
        os.close(read_fd)
        _run_child(write_fd, parsed, data, limits, cap, timeout)
    os.close(write_fd)
    try:
        raw, timed_out = _collect(read_fd, pid, started + timeout, cap)
    except BaseException:  # e.g. the task's soft time limit fired while we waited
        _kill_and_reap(pid)
        raise
    finally:
        os.close(read_fd)
    values, failures, running = _read_records(raw.split(b"\n"), parsed)
    if running is not None:
        name = parsed[running][0]
        if timed_out:
            message = f"yaql evaluation exceeded the time limit of {timeout:g} s"
            failures.append(YaqlFailure(name, TIMEOUT, message))
        else:
            message = "yaql evaluation exceeded its CPU or memory limit and was stopped"
            failures.append(YaqlFailure(name, MEMORY, message))
    elif len(values) + len(failures) < len(parsed):
        # The child died (or was stopped) between expressions: blame the next one. At the
        # deadline that is the time limit, which the caller names (a loaded machine can
        # reach it just as one expression ends and before the next starts).
        name = parsed[len(values) + len(failures)][0]
        if timed_out:
            message = f"yaql evaluation exceeded the time limit of {timeout:g} s"
            failures.append(YaqlFailure(name, TIMEOUT, message))
        else:
            failures.append(YaqlFailure(name, ERROR, "yaql evaluation was stopped"))
    return values, failures


def _read_records(
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


def _evaluate_here(
    parsed: list[tuple[str, Any]], data: Any, limits: Limits, *, direct_only: frozenset[str]
) -> tuple[dict[str, Any], list[YaqlFailure], set[str]]:
    """Expressions proven cheap (:func:`is_cheap`, :func:`is_direct`), evaluated in this
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
        line = _plain_line(index, expression, data, limits.yaql_max_iterations)
        if line is None:
            if name in direct_only:
                declined.add(name)
                continue
            context = context or _data_context(data)
            line = _result_line(index, expression, context, limits, _EVALUATION_ERRORS)
        line, budget = _within_budget(index, line, budget)
        lines.append(line.encode())
        kept.append((name, expression))
    values, failures, _ = _read_records(lines, kept)
    return values, failures, declined


# ---- plain expressions: yaql's answer without yaql's dispatch ------------------------
#
# yaql resolves every call among its overloads (~30 µs each), so a selection such as
# ``$.disks.where($.type = "ssd")`` over 24 disks costs ~3 ms, and the selection
# module's ``$.select((switch(…)))`` over 1,000 accounts a few tenths of a second. The
# few operations below (keys, ``len()``, ``where()``, ``select()``, arithmetic,
# comparisons, ``and``/``or``/``not``, ``switch``, parentheses) are evaluated directly,
# with yaql's own semantics, on the *happy path only*: a key that is present, numbers
# that are not booleans, a list shorter than yaql's iteration limit, a predicate that
# gives a boolean, a condition that is a plain value. Anything else (a missing key, a
# division by zero, another type, another function) declines, and yaql evaluates the
# whole expression, so errors and their messages are always yaql's own. Tests compare
# both ways on generated expressions and data.
#
# An expression not proven cheap for yaql may still be proven cheap for this
# evaluation (:func:`is_direct`: only these operations, and at most
# ``_MAX_DIRECT_CALLS`` estimated calls, each a plain Python step that grows nothing
# but the result list): it is tried in-process, and if it declines, yaql evaluates it
# in the child as before. Its time is bounded by the same estimate as yaql's cheap
# path, its memory by the data (no operation here builds anything larger than its
# input, except ``select``'s one value per element).


class _Decline(Exception):
    """The direct evaluation leaves this expression to yaql."""


_SCALARS = (str, int, float, bool, type(None))
_NUMBER_OPERATORS: dict[str, Any] = {
    "#operator_+": lambda a, b: a + b,
    "#operator_-": lambda a, b: a - b,
    "#operator_*": lambda a, b: a * b,
    # yaql's division: whole numbers divide to a whole number (floor), as upstream.
    "#operator_/": lambda a, b: a // b if isinstance(a, int) and isinstance(b, int) else a / b,
    "#operator_mod": lambda a, b: a % b,
}
_DIVIDING = frozenset({"#operator_/", "#operator_mod"})
_ORDER_OPERATORS: dict[str, Any] = {
    "#operator_<": lambda a, b: a < b,
    "#operator_>": lambda a, b: a > b,
    "#operator_<=": lambda a, b: a <= b,
    "#operator_>=": lambda a, b: a >= b,
}
_UNARY = frozenset({"#unary_operator_not", "#unary_operator_-", "#unary_operator_+"})
_BINARY = frozenset(
    {"*equal", "*not_equal", "#operator_and", "#operator_or"}
    | _NUMBER_OPERATORS.keys()
    | _ORDER_OPERATORS.keys()
)


def _plain_line(index: int, expression: Any, data: Any, limit: int) -> str | None:
    """The result line for ``expression`` evaluated directly, or None to ask yaql."""
    try:
        value = _direct(expression, data, limit)
    except (_Decline, RecursionError):
        return None
    try:
        return json.dumps({"i": index, "v": value}, allow_nan=False)
    except ValueError:  # a non-finite number: yaql's path words that failure
        return None


def _direct(node: Any, dollar: Any, limit: int) -> Any:
    if isinstance(node, expressions.Statement):
        return _direct(node.expression, dollar, limit)
    kind = type(node)
    if kind is expressions.Wrap:  # parentheses
        return _direct(node.expr, dollar, limit)
    if kind is expressions.Constant:  # not a KeywordConstant (an identifier)
        if isinstance(node.value, _SCALARS):
            return node.value
        raise _Decline
    if kind is expressions.GetContextValue:
        if node.path.value == "$":
            return dollar
        raise _Decline
    if kind is expressions.UnaryOperator:
        return _unary(node.name, _direct(node.args[0], dollar, limit))
    if kind in (expressions.BinaryOperator, expressions.Function):
        name = node.name
        if name == "#operator_.":
            return _member(node.args[0], node.args[1], dollar, limit)
        if name == "switch" and kind is expressions.Function:
            return _switch(node.args, dollar, limit)
        if len(node.args) == 2:
            if name in _LOGICAL:
                # yaql: `left() and right()` / `left() or right()`, the right side lazily.
                left = _direct(node.args[0], dollar, limit)
                if not isinstance(left, _SCALARS):
                    raise _Decline
                if bool(left) == (name == "#operator_or"):
                    return left
                return _direct(node.args[1], dollar, limit)
            left, right = (_direct(arg, dollar, limit) for arg in node.args)
            return _binary(name, left, right)
    raise _Decline


_LOGICAL = frozenset({"#operator_and", "#operator_or"})


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _unary(name: str, value: Any) -> Any:
    if name == "#unary_operator_not" and isinstance(value, _SCALARS):
        return not value
    if _number(value):
        if name == "#unary_operator_-":
            return -value
        if name == "#unary_operator_+":
            return +value
    raise _Decline


def _switch(rules: Any, dollar: Any, limit: int) -> Any:
    """yaql's ``switch``: the value of the first rule whose condition is true, else null."""
    # yaql matches the call before running it: every argument must be a `=>` rule.
    if not rules or any(type(rule) is not expressions.MappingRuleExpression for rule in rules):
        raise _Decline
    for rule in rules:
        condition = _direct(rule.source, dollar, limit)
        if not isinstance(condition, _SCALARS):
            raise _Decline
        if condition:
            return _direct(rule.destination, dollar, limit)
    return None


def _binary(name: str, left: Any, right: Any) -> Any:
    if name in ("*equal", "*not_equal"):
        if isinstance(left, _SCALARS) and isinstance(right, _SCALARS):
            return (left == right) == (name == "*equal")
        raise _Decline
    if _number(left) and _number(right):
        if name in _NUMBER_OPERATORS and not (name in _DIVIDING and right == 0):
            return _NUMBER_OPERATORS[name](left, right)
        if name in _ORDER_OPERATORS:
            return _ORDER_OPERATORS[name](left, right)
    raise _Decline


def _member(receiver: Any, member: Any, dollar: Any, limit: int) -> Any:
    """``receiver.key``, ``receiver.len()``, ``receiver.where(predicate)`` or
    ``receiver.select(selector)``."""
    value = _direct(receiver, dollar, limit)
    if type(member) is expressions.KeywordConstant:
        if isinstance(value, dict) and member.value in value:
            return value[member.value]
        raise _Decline
    if type(member) is not expressions.Function:
        raise _Decline
    if member.name == "len" and not member.args and isinstance(value, list | dict | str):
        return len(value)
    if member.name in ("where", "select") and len(member.args) == 1 and isinstance(value, list):
        if len(value) >= limit:
            raise _Decline
        lambda_ = member.args[0]
        if member.name == "select":
            return [_direct(lambda_, item, limit) for item in value]
        kept = []
        for item in value:
            verdict = _direct(lambda_, item, limit)
            if not isinstance(verdict, bool):
                raise _Decline
            if verdict:
                kept.append(item)
        return kept
    raise _Decline


def _direct_only(node: Any, depth: int) -> bool:
    """Whether ``node`` is written only in what :func:`_direct` evaluates (whatever the
    data: that may still decline), so that trying it is never wasted on the syntax."""
    if depth > _MAX_DEPTH:
        return False
    deeper = depth + 1
    if isinstance(node, expressions.Statement):
        return _direct_only(node.expression, deeper)
    kind = type(node)
    if kind is expressions.Wrap:
        return _direct_only(node.expr, deeper)
    if kind is expressions.Constant:
        return isinstance(node.value, _SCALARS)
    if kind is expressions.GetContextValue:
        return bool(node.path.value == "$")
    if kind is expressions.UnaryOperator:
        return node.name in _UNARY and _direct_only(node.args[0], deeper)
    if kind not in (expressions.BinaryOperator, expressions.Function):
        return False
    name, args = node.name, node.args
    if name == "#operator_.":
        receiver, member = args
        if type(member) is expressions.KeywordConstant:
            return _direct_only(receiver, deeper)
        if type(member) is not expressions.Function:
            return False
        if member.name == "len":
            return not member.args and _direct_only(receiver, deeper)
        return (
            member.name in ("where", "select")
            and len(member.args) == 1
            and _direct_only(receiver, deeper)
            and _direct_only(member.args[0], deeper)
        )
    if name == "switch" and kind is expressions.Function:
        return bool(args) and all(
            type(rule) is expressions.MappingRuleExpression
            and _direct_only(rule.source, deeper)
            and _direct_only(rule.destination, deeper)
            for rule in args
        )
    return len(args) == 2 and name in _BINARY and all(_direct_only(arg, deeper) for arg in args)


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
        values, failures, declined = _evaluate_here(here, data, limits, direct_only=direct_only)
        parts.append((values, failures))
    there = [(text, tree) for text, tree in parsed if routes[text] == CHILD or text in declined]
    if there:
        _root_context()  # build before forking so every child inherits it warm
        _prctl()
        parts.append(_evaluate_in_child(there, data, limits, timeout))
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
        outcome = _parse_or_fail(names[0], text, limits)
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
