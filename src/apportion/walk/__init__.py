"""The one traversal of decoded JSON: bounded, without recursion, written once.

A job's decoded JSON is walked by the worker's gate (workers/broker/gate.py: depth,
value count and reserved objects of the whole message), by the edge
(:mod:`apportion.edge`: every shape rule below, before pydantic), by the unknown-field
check (:mod:`apportion.unknown_fields`: keys against the job's schema, with
did-you-mean), by the decoder when it must name where a repeated key or an over-long
integer is, and, as the data yaql expressions read, by their budget
(:mod:`apportion.yaql_eval.budget`: the longest collection, the largest number). They
all go through the two drivers here:

* :func:`breadth_first` — level by level, values that sit at the same place grouped
  together, no paths built: the cheap "is anything wrong at all?" pass. A step sees a
  whole group at once, so its checks run as C-level passes (set unions, ``max`` of
  lengths) over many values instead of a Python call per value.
* :func:`depth_first` — one value at a time with its path, in a fixed order: run only
  to name what the cheap pass found (or, for unknown fields, to list every place).

The unknown-field check walks a job along its model's schema, compiled for it by
:mod:`apportion.walk.schema`.

And one set of rules for the shape of a job (:class:`Rules`, :func:`check`): nesting
depth, number of values, string and key lengths, strings a JSON encoder cannot write
back (lone UTF-16 surrogates such as ``"\\ud800"``: the job would be answered but its
result could never be serialised), numbers outside what the engines compute with
(integers beyond 64 bits, which float conversion rejects with ``OverflowError``, and
non-finite floats, which JSON cannot carry), and **reserved objects**: an object made
of exactly ``__type__`` and ``__value__`` is what kombu's JSON codec turns into a
Python object (a datetime, a Decimal …) or fails on (:func:`is_reserved`).

Every message names the limit an operator raises (``APPORTION_LIMITS__*``) or, for the
fixed number range, what the engines support.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from apportion.errors import Problem, Rejected
from apportion.limits import Limits, env_name

# Integers the engines compute with: 64-bit signed. Beyond it numpy overflows and
# float() raises; no size, count or weight in any job comes near it.
INT_MAX = 2**63 - 1
INT_MIN = -(2**63)
_FLOAT_MAX = 1.7976931348623157e308  # finite floats: NaN and ±inf fail both comparisons
_SURROGATE = re.compile("[\ud800-\udfff]")

# kombu's JSON decoder turns {"__type__": ..., "__value__": ...} into Python objects
# (datetime, Decimal, UUID, bytes) or raises on unknown types: never in a job or answer.
# The depth bound for a walk of data the edge has bounded already (a decoded job, data
# derived from one): it only keeps the walk's loop finite.
DEEPEST = 1 << 16

RESERVED_KEYS = frozenset(("__type__", "__value__"))
RESERVED_MESSAGE = (
    "an object made of exactly __type__ and __value__ is reserved by the message codec; "
    "rename those keys"
)


def is_reserved(obj: dict[Any, Any]) -> bool:
    """Whether ``obj`` is an object the message codec reserves (see :data:`RESERVED_KEYS`)."""
    return len(obj) == 2 and RESERVED_KEYS.issuperset(obj)


def out_of_range_message(digits: int) -> str:
    return (
        f"an integer of {digits} digits is outside the 64-bit range the engines compute in "
        "(-9223372036854775808 to 9223372036854775807)"
    )


@dataclass(frozen=True, slots=True)
class ShapeProblem:
    """The first thing found wrong with a job's shape, and the code it is answered with."""

    code: str
    problem: Problem

    def rejected(self) -> Rejected:
        p = self.problem
        return Rejected(f"{p.path}: {p.message}", [p], code=self.code)


# ---- the two drivers ------------------------------------------------------------------

# Values at one place (of a schema, or of nothing: ``None``), walked together.
Group = tuple[Any, list[Any]]
# Look at one group, append the groups one level further in, False to stop the walk.
Step = Callable[[Any, list[Any], list[Group]], bool]


def breadth_first(start: list[Group], step: Step, max_depth: int) -> bool | None:
    """Run ``step`` over ``start`` and every level its steps add, at most ``max_depth``
    levels: True when every level was looked at, False when a step stopped the walk,
    None when a level beyond ``max_depth`` remained."""
    level = start
    for _ in range(max_depth):
        inner: list[Group] = []
        for node, values in level:
            if not step(node, values, inner):
                return False
        if not inner:
            return True
        level = inner
    return None


# One value on the way: (value, its place in a schema or None, its path, its depth).
Frame = tuple[Any, Any, str, int]
# Look at one value, push the frames to visit next (the last pushed is visited first),
# return what was found to stop the walk, or None to go on.
Visit = Callable[[Any, Any, str, int, list[Frame]], Any]


def depth_first(value: Any, node: Any, visit: Visit) -> Any:
    """Run ``visit`` from ``value`` (at ``$``) over what it pushes: the first thing a
    visit found, or None."""
    stack: list[Frame] = [(value, node, "$", 0)]
    while stack:
        value, node, path, depth = stack.pop()
        found = visit(value, node, path, depth, stack)
        if found is not None:
            return found
    return None


def join(path: str, key: str) -> str:
    """The path of member ``key`` of the object at ``path`` (``$`` is the document)."""
    return key if path == "$" else f"{path}.{key}"


def children(value: Any, path: str) -> Iterable[tuple[Any, Any, str]]:
    """(key or index, child, its path) of a container, in document order; none for a scalar."""
    if isinstance(value, dict):
        return ((key, child, join(path, str(key))) for key, child in value.items())
    if isinstance(value, list):
        return ((i, child, f"{path}[{i}]") for i, child in enumerate(value))
    return ()


def first(value: Any, wanted: Callable[[Any], bool]) -> tuple[Any, str] | None:
    """The first value inside ``value`` (itself included) that is ``wanted``, depth
    first and each container's last member first, with its path; None when none is.
    For naming what a cheaper check showed is there."""

    def visit(node: Any, _: Any, path: str, depth: int, stack: list[Frame]) -> Any:
        if wanted(node):
            return node, path
        stack.extend((child, None, where, depth + 1) for _, child, where in children(node, path))
        return None

    found: tuple[Any, str] | None = depth_first(value, None, visit)
    return found


# ---- the shape rules ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rules:
    """The shape a walk enforces: ``limits``' depth, values and string length.

    ``outer_depth`` and ``outer_items``: the job sits inside a wrapper of that many
    levels and values (the gate walks Celery's ``[args, kwargs, embed]``); messages
    still speak of the job's limits. ``values``: strings, keys and numbers are checked
    too; the gate leaves them to the engine, which names them with the job's paths.
    """

    limits: Limits
    outer_depth: int = 0
    outer_items: int = 0
    values: bool = True

    @property
    def max_depth(self) -> int:
        return self.limits.max_json_depth + self.outer_depth

    @property
    def max_items(self) -> int:
        return self.limits.max_json_items + self.outer_items

    def admits(self, height: int, items: int, longest: int) -> bool:
        """Whether a document of at most ``height`` levels of nesting, ``items`` values
        and strings of ``longest`` characters keeps within these rules' bounds."""
        return (
            height <= self.max_depth
            and items <= self.max_items
            and longest <= self.limits.max_string_length
        )


def check(payload: Any, rules: Rules) -> ShapeProblem | None:
    """The first value of ``payload`` that breaks ``rules``, with its path; None if none.

    The paths are only built, by a second walk, when the cheap first walk found a
    problem.
    """
    if _shape_ok(payload, rules):
        return None
    return _locate(payload, rules)


# The cheap pass: decoded JSON holds exact dicts, lists, strs, ints and floats, so
# ``type(x) is`` checks suffice and keep it at a fraction of pydantic's own cost on a
# large job. One group per level, so no depth is carried per container; the keys are
# checked once at the end.


def _shape_ok(payload: Any, rules: Rules) -> bool:
    max_string = rules.limits.max_string_length
    if type(payload) is not dict and type(payload) is not list:
        return not rules.values or _scalar_problem(payload, "$", max_string) is None
    tally = _Tally(rules)
    if not breadth_first([(None, [payload])], tally.step, rules.max_depth):
        return False  # a value broke a rule, or a container is deeper than the limit
    return _keys_ok(tally.dicts, max_string if rules.values else None)


class _Tally:
    """What the cheap pass carries from level to level: the values left to spend and
    every object seen (for the keys)."""

    __slots__ = ("budget", "dicts", "max_string", "values")

    def __init__(self, rules: Rules) -> None:
        self.budget = rules.max_items
        self.dicts: list[dict[Any, Any]] = []
        self.max_string = rules.limits.max_string_length
        self.values = rules.values

    def step(self, _: Any, level: list[Any], inner: list[Group]) -> bool:
        self.budget -= sum(map(len, level))
        if self.budget < 0:
            return False
        if self.values:
            found = _scan(level, self.dicts, self.max_string)
        else:
            found = _scan_containers(level, self.dicts)
        if found:
            inner.append((None, found))
        return found is not None


def _scan(level: list[Any], dicts: list[dict[Any, Any]], max_string: int) -> list[Any] | None:
    """The containers ``level``'s containers hold, or None when one holds a bad value.

    One function with its bounds in locals: a job is walked on every solve, and a call
    per value costs more than the check itself.
    """
    lo, hi, flo, fhi = INT_MIN, INT_MAX, -_FLOAT_MAX, _FLOAT_MAX
    inner: list[Any] = []
    push, keep = inner.append, dicts.append
    for value in level:
        if type(value) is dict:
            keep(value)
            value = value.values()
        for child in value:
            kind = type(child)
            if kind is dict or kind is list:
                push(child)
            elif kind is str:
                if len(child) > max_string or not (child.isascii() or _text_ok(child)):
                    return None
            elif kind is int:
                if not lo <= child <= hi:
                    return None
            elif kind is float:
                if not flo <= child <= fhi:
                    return None
            elif kind is not bool and child is not None:
                return None  # not JSON data; the walk with paths says where
    return inner


def _scan_containers(level: list[Any], dicts: list[dict[Any, Any]]) -> list[Any]:
    """The containers ``level``'s containers hold (values are not looked at)."""
    inner: list[Any] = []
    push, keep = inner.append, dicts.append
    for value in level:
        if type(value) is dict:
            keep(value)
            value = value.values()
        for child in value:
            if type(child) is dict or type(child) is list:
                push(child)
    return inner


def _keys_ok(dicts: list[dict[Any, Any]], max_string: int | None) -> bool:
    """No dict reserved (:func:`is_reserved`) and, unless ``max_string`` is None, every
    key of every dict a string of at most ``max_string`` without a lone surrogate."""
    keys = set().union(*dicts)  # a job repeats its keys: each distinct one checked once
    if "__type__" in keys and any(map(is_reserved, dicts)):
        return False
    if max_string is None:
        return True
    try:
        # C-level passes; isascii() is O(1) per string, the surrogate search only for others
        return max(map(len, keys), default=0) <= max_string and (
            all(map(str.isascii, keys)) or all(map(_text_ok, keys))
        )
    except TypeError:  # a Python caller's non-string key
        return False


def _text_ok(text: str) -> bool:
    return _SURROGATE.search(text) is None


# The walk with paths: what breaks a rule, named.


def _locate(payload: Any, rules: Rules) -> ShapeProblem | None:
    budget = [rules.max_items]
    max_depth, max_string = rules.max_depth, rules.limits.max_string_length

    def visit(value: Any, _: Any, path: str, depth: int, stack: list[Frame]) -> Any:
        if not isinstance(value, dict | list):
            return _scalar_problem(value, path, max_string) if rules.values else None
        if depth >= max_depth:
            return _too_deep(path, rules.limits)
        budget[0] -= len(value)
        if budget[0] < 0:
            return _too_many(path, rules.limits)
        if isinstance(value, dict):
            if is_reserved(value):
                return ShapeProblem("reserved_key", Problem(path, RESERVED_MESSAGE))
            if rules.values:
                found = next(filter(None, (_key_problem(k, path, max_string) for k in value)), None)
                if found is not None:
                    return found
        stack.extend((child, None, where, depth + 1) for _, child, where in children(value, path))
        return None

    found: ShapeProblem | None = depth_first(payload, None, visit)
    return found


def _too_deep(path: str, limits: Limits) -> ShapeProblem:
    return ShapeProblem(
        "too_deep",
        Problem(
            path,
            f"nested deeper than {limits.max_json_depth} levels "
            f"(raise {env_name('max_json_depth')})",
        ),
    )


def _too_many(path: str, limits: Limits) -> ShapeProblem:
    return ShapeProblem(
        "too_large",
        Problem(
            path,
            f"the job holds more than {limits.max_json_items} values "
            f"(raise {env_name('max_json_items')})",
        ),
    )


def _scalar_problem(value: Any, path: str, max_string: int) -> ShapeProblem | None:
    if isinstance(value, str):
        return _string_problem(value, path, max_string, "string")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        if INT_MIN <= value <= INT_MAX:
            return None
        return ShapeProblem(
            "number_out_of_range", Problem(path, out_of_range_message(len(str(abs(value)))))
        )
    if isinstance(value, float):
        if -_FLOAT_MAX <= value <= _FLOAT_MAX:
            return None
        return ShapeProblem(
            "number_out_of_range", Problem(path, f"{value!r} is not a finite number")
        )
    return ShapeProblem(
        "invalid_json", Problem(path, f"{type(value).__name__} is not a JSON value")
    )


def _key_problem(key: Any, path: str, max_string: int) -> ShapeProblem | None:
    if not isinstance(key, str):
        return ShapeProblem(
            "invalid_json", Problem(path, f"a key of type {type(key).__name__} is not JSON")
        )
    return _string_problem(key, path, max_string, "key")


def _string_problem(text: str, path: str, max_string: int, what: str) -> ShapeProblem | None:
    """A string value or key (``what``) over the length limit or holding a lone surrogate."""
    if len(text) > max_string:
        return ShapeProblem(
            "too_large",
            Problem(
                path,
                f"a {what} of {len(text)} characters exceeds the limit of {max_string} "
                f"(raise {env_name('max_string_length')})",
            ),
        )
    if not _text_ok(text):
        return ShapeProblem(
            "invalid_string",
            Problem(
                path,
                f"the {what} holds a lone UTF-16 surrogate (such as \\ud800), which is not "
                "text and cannot be written back as JSON",
            ),
        )
    return None


__all__ = [
    "DEEPEST",
    "INT_MAX",
    "INT_MIN",
    "RESERVED_KEYS",
    "RESERVED_MESSAGE",
    "Frame",
    "Group",
    "Rules",
    "ShapeProblem",
    "breadth_first",
    "check",
    "children",
    "depth_first",
    "first",
    "is_reserved",
    "join",
    "out_of_range_message",
]
