"""The edge: what every job must be before any engine sees it, whatever its kind.

Two checks, both before pydantic and both without recursion (hostile nesting cannot
raise ``RecursionError`` here):

* :func:`loads` decodes JSON text strictly: at most ``max_payload_bytes``, no
  ``NaN``/``Infinity`` tokens, and **no duplicate keys** — ``{"size": 1, "size": 9}``
  means one thing to one parser and another to the next, so it is refused with the
  key's path instead of letting the last one win.
* :func:`shape_problem` checks decoded data against the shape rules of a job (depth,
  values, strings, keys, numbers, reserved objects), by the one walk of decoded JSON
  there is, :mod:`apportion.walk`, which the worker's gate and the unknown-field check
  use too.

Both are exact but look at every value in Python. :mod:`apportion.edge_fast` answers the
common case, valid JSON, in C (orjson and byte counts) and proves from the text that its
answer is the strict one; anything it cannot prove takes the strict path, so every
rejection is the strict path's. :func:`load_bounded` also returns what the text shows
about the value's shape, which can make :func:`shape_problem`'s walk unnecessary.
"""

from __future__ import annotations

import json
from typing import Any

from apportion import walk
from apportion.edge_fast import Bounds, fast_decode, may_hold_type_key
from apportion.errors import Problem, Rejected
from apportion.limits import DEFAULT_LIMITS, Limits, env_name, over_limit
from apportion.walk import (
    INT_MAX,
    INT_MIN,
    RESERVED_KEYS,
    RESERVED_MESSAGE,
    ShapeProblem,
    is_reserved,
    out_of_range_message,
)


def reserved_path(value: Any) -> str | None:
    """The path of the first reserved object in JSON data ``value``; None if it has none.

    A walk of every container: call it only when the data may hold one (the text
    holds ``"__type__"``, see :func:`apportion.edge_fast.may_hold_type_key`).
    """
    found = walk.first(value, lambda node: type(node) is dict and is_reserved(node))
    return None if found is None else found[1]


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
    text: str | bytes, *, allow_constants: bool = False, limits: Limits | None = None
) -> tuple[Any, tuple[str, str] | None, Bounds | None]:
    """JSON text → (value, (path, key) of the first repeated key or None, the value's
    :class:`Bounds` when the text proves them, tight for ``limits``).

    Raises ``ValueError`` for text that is not JSON (``NaN`` and ``Infinity`` included,
    unless ``allow_constants``: a Python producer's json writes them, and the shape walk
    then rejects them with their path) and ``RecursionError`` for nesting deeper than
    the interpreter's stack.
    """
    fast = fast_decode(text, limits)
    if fast is not None:
        return fast[0], None, fast[1]
    value, duplicate = strict_decode(text, allow_constants=allow_constants)
    return value, duplicate, None


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
    found = walk.first(value, lambda node: isinstance(node, _Long))
    if found is not None:
        return LongInteger(found[1], found[0].digits, value)
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
    found = walk.first(value, lambda node: isinstance(node, _Duplicate))
    if found is None:
        raise AssertionError("a marked object is always reachable from the value")
    node, path = found
    return walk.join(path, node.key), node.key


# ---- the shape walk -------------------------------------------------------------------


def shape_problem(payload: Any, limits: Limits = DEFAULT_LIMITS) -> ShapeProblem | None:
    """The first value that breaks a shape rule (see :mod:`apportion.walk`), with its path."""
    return walk.check(payload, walk.Rules(limits))


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
