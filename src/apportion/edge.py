"""The edge: what every job must be before any engine sees it, whatever its kind.

Two checks, both before pydantic and both without recursion (hostile nesting cannot
raise ``RecursionError`` here):

* :func:`loads` decodes JSON text strictly: at most ``max_payload_bytes``, no
  ``NaN``/``Infinity`` tokens, and **no duplicate keys** — ``{"size": 1, "size": 9}``
  means one thing to one parser and another to the next, so it is refused with the
  key's path instead of letting the last one win.
* :func:`shape_problem` walks decoded data once: nesting depth, number of values,
  string and key lengths, strings a JSON encoder cannot write back (lone UTF-16
  surrogates such as ``"\\ud800"``: the job would be answered but its result could
  never be serialised), and numbers outside what the engines compute with (integers
  beyond 64 bits, which float conversion rejects with ``OverflowError``, and
  non-finite floats, which JSON cannot carry), and **reserved objects**: an object made
  of exactly ``__type__`` and ``__value__`` is what kombu's JSON codec turns into a
  Python object (a datetime, a Decimal …) or fails on, so a worker's gate refuses it
  (workers/broker/gate.py) and ``apportion solve`` must too (:func:`is_reserved`).

Every message names the limit an operator raises (``APPORTION_LIMITS__*``) or, for
the fixed number range, what the engines support.

Both are exact but walk every value in Python. :mod:`apportion.edge_fast` answers the
common case, valid JSON, in C (orjson and byte counts) and proves from the text that its
answer is the strict one; anything it cannot prove takes the strict path, so every
rejection is the strict path's. :func:`load_bounded` also returns what the text shows
about the value's shape, which can make :func:`shape_problem`'s walk unnecessary.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from apportion.edge_fast import Bounds, fast_decode, may_hold_type_key
from apportion.errors import Problem, Rejected
from apportion.limits import DEFAULT_LIMITS, Limits, env_name, over_limit

# Integers the engines compute with: 64-bit signed. Beyond it numpy overflows and
# float() raises; no size, count or weight in any job comes near it.
INT_MAX = 2**63 - 1
INT_MIN = -(2**63)
_FLOAT_MAX = 1.7976931348623157e308  # finite floats: NaN and ±inf fail both comparisons
_SURROGATE = re.compile("[\ud800-\udfff]")

# kombu's JSON decoder turns {"__type__": ..., "__value__": ...} into Python objects
# (datetime, Decimal, UUID, bytes) or raises on unknown types: never in a job or answer.
RESERVED_KEYS = frozenset(("__type__", "__value__"))
RESERVED_MESSAGE = (
    "an object made of exactly __type__ and __value__ is reserved by the message codec; "
    "rename those keys"
)


def is_reserved(obj: dict[Any, Any]) -> bool:
    """Whether ``obj`` is an object the message codec reserves (see :data:`RESERVED_KEYS`)."""
    return len(obj) == 2 and RESERVED_KEYS.issuperset(obj)


def reserved_path(value: Any) -> str | None:
    """The path of the first reserved object in JSON data ``value``; None if it has none.

    A walk of every container: call it only when the data may hold one (the text
    holds ``"__type__"``, see :func:`apportion.edge_fast.may_hold_type_key`).
    """
    return next(
        (path for node, path in _nodes(value) if type(node) is dict and is_reserved(node)), None
    )


def out_of_range_message(digits: int) -> str:
    return (
        f"an integer of {digits} digits is outside the 64-bit range the engines compute in "
        "(-9223372036854775808 to 9223372036854775807)"
    )


def too_many_digits(exc: BaseException) -> bool:
    """Whether ``exc`` is Python's refusal to convert an integer of more digits than
    ``sys.get_int_max_str_digits()`` (4,300 by default) from or to text."""
    return isinstance(exc, ValueError) and "integer string conversion" in str(exc)


class LongInteger(ValueError):
    """JSON text holds an integer literal longer than Python converts (4,300 digits)."""

    def __init__(self, path: str, digits: int, value: Any = None) -> None:
        super().__init__(f"{path}: {out_of_range_message(digits)}")
        self.path = path
        self.digits = digits
        # The text's value with each such literal replaced by a placeholder (not JSON
        # data): what the rest of the document says, such as the job's id.
        self.value = value

    def rejected(self) -> Rejected:
        return Rejected.at(self.path, out_of_range_message(self.digits), code="number_out_of_range")


@dataclass(frozen=True, slots=True)
class ShapeProblem:
    """The first thing found wrong with a job's shape, and the code it is answered with."""

    code: str
    problem: Problem

    def rejected(self) -> Rejected:
        p = self.problem
        return Rejected(f"{p.path}: {p.message}", [p], code=self.code)


# ---- strict decoding ------------------------------------------------------------------


class _Duplicate(dict[str, Any]):
    """An object that had a key twice: kept (with its last value) so its path can be found."""

    __slots__ = ("key",)

    def __init__(self, pairs: list[tuple[str, Any]], key: str) -> None:
        super().__init__(pairs)
        self.key = key


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def decode(
    text: str | bytes, *, allow_constants: bool = False
) -> tuple[Any, tuple[str, str] | None]:
    """JSON text → (value, (path, key) of the first repeated key or None).

    Raises ``ValueError`` for text that is not JSON (``NaN`` and ``Infinity`` included,
    unless ``allow_constants``: a Python producer's json writes them, and the shape walk
    then rejects them with their path) and ``RecursionError`` for nesting deeper than
    the interpreter's stack.
    """
    fast = fast_decode(text)
    if fast is not None:
        return fast[0], None
    return strict_decode(text, allow_constants=allow_constants)


def strict_decode(
    text: str | bytes, *, allow_constants: bool = False
) -> tuple[Any, tuple[str, str] | None]:
    """:func:`decode` by :mod:`json` alone: what the fast path must always agree with.

    The pairs hook costs one C-level dict build and a length comparison per object; the
    path of a repeated key is only looked for when there is one.
    """
    marked: list[_Duplicate] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                break
            seen.add(key)
        duplicate = _Duplicate(pairs, key)
        marked.append(duplicate)
        return duplicate

    constant = None if allow_constants else _no_constants
    try:
        value = json.loads(text, parse_constant=constant, object_pairs_hook=pairs_hook)
    except ValueError as exc:
        if too_many_digits(exc):
            raise _long_integer(text, constant) from None
        raise
    return value, (_locate_duplicate(value) if marked else None)


class _Long:
    """An integer literal too long to convert, kept in place so its path can be found."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _long_integer(text: str | bytes, constant: Any) -> LongInteger:
    """The :class:`LongInteger` for text that holds one: decoded again, each literal
    Python cannot convert kept as a :class:`_Long`, to find its path."""

    longest = [0]

    def parse_int(literal: str) -> Any:
        try:
            return int(literal)
        except ValueError:
            digits = len(literal.lstrip("-"))
            longest[0] = max(longest[0], digits)
            return _Long(digits)

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) < len(pairs):  # a repeated key: keep the literal whichever came last
            obj.update((key, item) for key, item in pairs if isinstance(item, _Long))
        return obj

    value = json.loads(
        text, parse_constant=constant, parse_int=parse_int, object_pairs_hook=pairs_hook
    )
    for node, path in _nodes(value):
        if isinstance(node, _Long):
            return LongInteger(path, node.digits, value)
    return LongInteger("$", longest[0], value)  # inside a repeated key's dropped value: no path


def loads(text: str | bytes, limits: Limits = DEFAULT_LIMITS) -> Any:
    """Decode JSON text, refusing what :mod:`json` lets through (see module doc)."""
    return load_bounded(text, limits)[0]


def load_bounded(text: str | bytes, limits: Limits = DEFAULT_LIMITS) -> tuple[Any, Bounds | None]:
    """:func:`loads`, with bounds on the value's shape when the text proves them.

    Where ``bounds.vouch(limits)`` holds, :func:`shape_problem` of the value (or, with
    ``level=1``, of each item of a decoded array) is None without walking it.
    """
    size = len(text)
    if size > limits.max_payload_bytes:
        raise over_limit(
            "max_payload_bytes",
            Problem(
                "$",
                f"payload of {size} bytes exceeds the limit of {limits.max_payload_bytes} bytes "
                f"(raise {env_name('max_payload_bytes')})",
            ),
        )
    fast = fast_decode(text, limits)
    if fast is not None:
        return fast
    try:
        value, duplicate = strict_decode(text)
    except RecursionError:
        raise Rejected.at(
            "$",
            f"JSON nested too deeply (the limit is {limits.max_json_depth} levels, "
            f"{env_name('max_json_depth')})",
            code="too_deep",
        ) from None
    except LongInteger as exc:
        raise exc.rejected() from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise Rejected.at("$", f"not valid JSON: {exc}", code="malformed_json") from None
    if duplicate is not None:
        raise duplicate_key(*duplicate)
    return value, None


def duplicate_key(path: str, key: str) -> Rejected:
    return Rejected.at(
        path,
        f"the key {key!r} appears more than once in this object; send each key once "
        "(which one wins differs between JSON parsers)",
        code="duplicate_key",
    )


def _locate_duplicate(value: Any) -> tuple[str, str]:
    for node, path in _nodes(value):
        if isinstance(node, _Duplicate):
            return _join(path, node.key), node.key
    raise AssertionError("a marked object is always reachable from the value")


def _nodes(value: Any) -> Iterator[tuple[Any, str]]:
    """Every value inside decoded JSON ``value`` with its path, depth first, without
    recursion (for finding what a cheaper check showed is there)."""
    stack: list[tuple[Any, str]] = [(value, "$")]
    while stack:
        node, path = stack.pop()
        yield node, path
        if isinstance(node, dict):
            stack.extend((child, _join(path, k)) for k, child in node.items())
        elif isinstance(node, list):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(node))


def _join(path: str, key: str) -> str:
    return key if path == "$" else f"{path}.{key}"


# ---- the shape walk -------------------------------------------------------------------


def _keys_ok(dicts: list[dict[Any, Any]], max_string: int) -> bool:
    """Every key of every dict a string of at most ``max_string`` without a lone
    surrogate, and no dict reserved (:func:`is_reserved`)."""
    keys = set().union(*dicts)  # a job repeats its keys: each distinct one checked once
    if "__type__" in keys and any(map(is_reserved, dicts)):
        return False
    try:
        # C-level passes; isascii() is O(1) per string, the surrogate search only for others
        return max(map(len, keys), default=0) <= max_string and (
            all(map(str.isascii, keys)) or all(map(_text_ok, keys))
        )
    except TypeError:  # a Python caller's non-string key
        return False


def _shape_ok(payload: Any, limits: Limits) -> bool:
    """The cheap pass: no paths built, only "is anything wrong at all?".

    Decoded JSON holds exact dicts, lists, strs, ints and floats, so ``type(x) is``
    checks suffice and keep this at a fraction of pydantic's own cost on a large job.
    One level of nesting at a time, so no depth is carried per container; the keys
    are checked once at the end. One function with its bounds in locals: a job is
    walked on every solve, and a call per level costs more than a small level's values.
    """
    max_string = limits.max_string_length
    if type(payload) is not dict and type(payload) is not list:
        return _scalar_ok(payload, max_string)
    lo, hi, flo, fhi = INT_MIN, INT_MAX, -_FLOAT_MAX, _FLOAT_MAX
    budget = limits.max_json_items
    dicts: list[dict[Any, Any]] = []
    keep = dicts.append
    level: list[Any] = [payload]
    for _ in range(limits.max_json_depth):
        # Check the containers in `level` and replace them by the containers they hold.
        inner: list[Any] = []
        push = inner.append
        for value in level:
            budget -= len(value)
            if budget < 0:
                return False
            if type(value) is dict:
                keep(value)
                children: Any = value.values()
            else:
                children = value
            for child in children:
                kind = type(child)
                if kind is dict or kind is list:
                    push(child)
                elif kind is str:
                    if len(child) > max_string or not (child.isascii() or _text_ok(child)):
                        return False
                elif kind is int:
                    if not lo <= child <= hi:
                        return False
                elif kind is float:
                    if not flo <= child <= fhi:
                        return False
                elif kind is not bool and child is not None:
                    return False  # not JSON data; the slow pass says where
        if not inner:
            return _keys_ok(dicts, max_string)
        level = inner
    return False  # a container deeper than the limit


def _text_ok(text: str) -> bool:
    return _SURROGATE.search(text) is None


def _scalar_ok(value: Any, max_string: int) -> bool:
    return _scalar_problem(value, "$", max_string) is None


def _scalar_problem(value: Any, path: str, max_string: int) -> ShapeProblem | None:
    if isinstance(value, str):
        if len(value) > max_string:
            return ShapeProblem(
                "too_large",
                Problem(
                    path,
                    f"a string of {len(value)} characters exceeds the limit of {max_string} "
                    f"(raise {env_name('max_string_length')})",
                ),
            )
        if not _text_ok(value):
            return _bad_text(path, "string")
        return None
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


def _bad_text(path: str, what: str) -> ShapeProblem:
    return ShapeProblem(
        "invalid_string",
        Problem(
            path,
            f"the {what} holds a lone UTF-16 surrogate (such as \\ud800), which is not text "
            "and cannot be written back as JSON",
        ),
    )


def shape_problem(payload: Any, limits: Limits = DEFAULT_LIMITS) -> ShapeProblem | None:
    """The first value that breaks a shape rule (see module doc), with its path.

    The paths are only built, in a second walk, when the cheap first walk found a problem.
    """
    if _shape_ok(payload, limits):
        return None
    return _locate(payload, limits)


def _locate(payload: Any, limits: Limits) -> ShapeProblem | None:
    max_depth, max_string = limits.max_json_depth, limits.max_string_length
    budget = limits.max_json_items
    stack: list[tuple[Any, str, int]] = [(payload, "$", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, dict):
            items: Any = value.items()
        elif isinstance(value, list):
            items = enumerate(value)
        else:
            found = _scalar_problem(value, path, max_string)
            if found is not None:
                return found
            continue
        if depth >= max_depth:
            return ShapeProblem(
                "too_deep",
                Problem(
                    path,
                    f"nested deeper than {max_depth} levels (raise {env_name('max_json_depth')})",
                ),
            )
        budget -= len(value)
        if budget < 0:
            return ShapeProblem(
                "too_large",
                Problem(
                    path,
                    f"the job holds more than {limits.max_json_items} values "
                    f"(raise {env_name('max_json_items')})",
                ),
            )
        in_list = isinstance(value, list)
        if not in_list and is_reserved(value):
            return ShapeProblem("reserved_key", Problem(path, RESERVED_MESSAGE))
        for key, child in items:
            if in_list:
                child_path = f"{path}[{key}]"
            else:
                found = _key_problem(key, path, max_string)
                if found is not None:
                    return found
                child_path = _join(path, str(key))
            stack.append((child, child_path, depth + 1))
    return None


def _key_problem(key: Any, path: str, max_string: int) -> ShapeProblem | None:
    if not isinstance(key, str):
        return ShapeProblem(
            "invalid_json", Problem(path, f"a key of type {type(key).__name__} is not JSON")
        )
    if len(key) > max_string:
        return ShapeProblem(
            "too_large",
            Problem(
                path,
                f"a key of {len(key)} characters exceeds the limit of {max_string} "
                f"(raise {env_name('max_string_length')})",
            ),
        )
    if not _text_ok(key):
        return _bad_text(path, "key")
    return None


__all__ = [
    "INT_MAX",
    "INT_MIN",
    "RESERVED_KEYS",
    "RESERVED_MESSAGE",
    "Bounds",
    "LongInteger",
    "ShapeProblem",
    "decode",
    "duplicate_key",
    "is_reserved",
    "load_bounded",
    "loads",
    "may_hold_type_key",
    "out_of_range_message",
    "reserved_path",
    "shape_problem",
    "strict_decode",
    "too_many_digits",
]
