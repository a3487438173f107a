"""The edge's fast path: orjson decodes, and the text proves the answer is the strict one.

:func:`apportion.edge.decode` is exact but slow (a Python hook per object, a Python walk
per value). :func:`fast_decode` decodes with orjson and returns a value only when it can
show, from the text and a C-level re-encoding, that the strict decoder returns an equal
value of the same types; whenever it cannot, it returns ``None`` and the caller runs the
strict path, so every rejection and its message stay the strict path's.

What orjson does differently, and how each difference is excluded:

* duplicate keys: orjson keeps the last. Every ``:`` in a JSON text either ends an
  object member or is a character of a string, and (unless written ``\\u003a``) stays
  one ``:`` in the decoded string; the compact re-encoding holds one ``:`` per member
  kept and one per decoded ``:``. A dropped member takes its ``:`` (and those of its
  value) with it, so equal counts prove no key was repeated.
* integers beyond 64 bits become floats in orjson, ints in :mod:`json`: a text without
  a run of 19 digits has none (nor any integer the shape walk would refuse).
* nesting: orjson refuses more than 1,024 levels, :mod:`json` raises ``RecursionError``
  near the interpreter's limit: a text nested deeper than :data:`_SAFE_HEIGHT` is left
  to the strict path.
* NaN, Infinity, numbers that overflow to infinity, lone surrogates, invalid UTF-8, a
  BOM: orjson refuses them all, so the strict path decides.

The same passes give :class:`Bounds` on the shape of everything in the document (nesting,
values, string length), which let :func:`apportion.edge.shape_problem`'s walk be skipped
when they show that no limit of the walk's :class:`apportion.walk.Rules` can be broken.
The rules stay the walk's (:meth:`~apportion.walk.Rules.admits` judges the bounds); the
bounds are byte counts, and walking every value of a big job instead costs it more than
the decode itself (bench/placement.md, "One walk").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from apportion.limits import Limits
from apportion.walk import Rules

# Far below the interpreter's recursion limit (1,000 frames), so the strict decoder,
# called from any ordinary stack depth, would not raise RecursionError either.
_SAFE_HEIGHT = 200
# The shortest integer literal outside the 64-bit range has 19 digits.
_LONG_NUMBER = b"0" * 19

_DIGITS_ONLY = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_QUOTES_ONLY = bytes(0x22 if b == 0x22 else 0x78 for b in range(256))  # '"' or 'x'
_STRUCTURE = bytes.maketrans(b"{}", b"[]")
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
_STRING = re.compile(rb'"[^"]*"')  # in text whose quotes all start or end a string


@dataclass(frozen=True, slots=True)
class Bounds:
    """Upper bounds, read off a JSON text, on the shape of everything decoded from it.

    Numbers, strings and types need no bound: a value :func:`fast_decode` returns holds
    only JSON types, integers within 64 bits, finite floats and no lone surrogate.
    """

    height: int  # levels of nesting: 0 for a scalar, 1 for a flat array or object
    items: int  # at least the number of array items and object members in the document
    longest: int  # at least the length of every string and key in it
    # The text may hold the key "__type__", so perhaps a reserved object (see
    # apportion.edge.is_reserved): only a walk can tell.
    typed: bool = False

    def vouch(self, limits: Limits, level: int = 0) -> bool:
        """True when a value ``level`` levels inside the document breaks no shape rule."""
        return not self.typed and Rules(limits).admits(
            self.height - level, self.items, self.longest
        )


def fast_decode(text: str | bytes, limits: Limits | None = None) -> tuple[Any, Bounds] | None:
    """orjson's value of ``text`` with its :class:`Bounds`, or None when the strict
    decoder must decide. ``limits``: what the bounds are worth proving (the bounds of
    a text are always valid, only less tight without them)."""
    try:
        value = orjson.loads(text)
        compact = orjson.dumps(value)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return None
    data = text.encode() if isinstance(text, str) else text  # valid UTF-8: orjson read it
    escaped = b"\\" in data
    if escaped and (b"\\u003a" in data or b"\\u003A" in data):
        return None  # a ':' written as an escape: the count below would not hold
    if data.count(b":") != compact.count(b":"):
        return None  # a repeated key (see module doc)
    if may_hold_long_integer(data):
        return None
    quoted = _unescaped(data) if escaped else data
    skeleton = _skeleton(quoted)
    height = _height(skeleton)
    if height is None:
        return None
    max_items = limits.max_json_items if limits else 0
    # Each item is at least one byte; an array or object of n items holds n - 1 commas.
    items = len(data) if len(data) <= max_items else data.count(b",") + skeleton.count(b"[")
    max_string = limits.max_string_length if limits else 0
    return value, Bounds(height, items, _longest(quoted, max_string), may_hold_type_key(data))


def _as_json_writes(text: str) -> bytes:
    """A pattern for ``text`` inside a JSON string, each character literal or escaped."""
    return b"".join(
        b"(?:%s|\\\\u%s)"
        % (re.escape(ch.encode()), "".join(f"[{d}{d.upper()}]" for d in f"{ord(ch):04x}").encode())
        for ch in text
    )


_ESCAPED_TYPE_KEY = re.compile(b'"' + _as_json_writes("__type__") + b'"')


def may_hold_long_integer(data: bytes) -> bool:
    """True when ``data`` (JSON text) may hold an integer beyond 64 bits, which orjson
    decodes to a float where :mod:`json` keeps the int (any run of 19 digits counts)."""
    return data.translate(_DIGITS_ONLY).find(_LONG_NUMBER) >= 0


def may_hold_type_key(data: bytes) -> bool:
    """Whether JSON text ``data`` may hold the key ``"__type__"``: one C-level search
    of the text, and more only when it holds an escape."""
    if b'"__type__"' in data:
        return True
    # A one-byte search is a memchr, a two-byte one is not; most jobs hold no backslash.
    return b"\\" in data and b"\\u" in data and _ESCAPED_TYPE_KEY.search(data) is not None


def _unescaped(data: bytes) -> bytes:
    """``data`` with every escape pair inside strings overwritten by ``xx``: then each
    ``"`` is a string's start or end, and each string keeps its length."""
    # In valid JSON a backslash only starts an escape, so pairing them from the left
    # pairs them as the decoder does; what is left of a run escapes the next character.
    return data.replace(b"\\\\", b"xx").replace(b'\\"', b"xx")


def _skeleton(quoted: bytes) -> bytes:
    """The brackets of valid JSON text outside its strings, '{' read as '[' and '}' as
    ']' (nesting ignores the kind)."""
    skeleton = quoted.translate(_STRUCTURE, _NOT_STRUCTURE)
    # Strings are now '""' unless they hold brackets; removing pairs from the left
    # removes them all exactly when none does (an opening quote followed by a bracket
    # stays, and keeps every later pair aligned).
    skeleton = skeleton.replace(b'""', b"")
    if b'"' in skeleton:  # a string holds a bracket: drop every string, one by one
        skeleton = _STRING.sub(b"", quoted).translate(_STRUCTURE, _NOT_STRUCTURE)
    return skeleton


def _height(skeleton: bytes) -> int | None:
    """Levels of nesting of a skeleton, or None when deeper than :data:`_SAFE_HEIGHT`."""
    height = 0
    while skeleton:  # each pass removes the innermost containers: one level
        if height == _SAFE_HEIGHT:
            return None
        skeleton = skeleton.replace(b"[]", b"")
        height += 1
    return height


def _longest(quoted: bytes, max_string: int) -> int:
    """A bound on every string's length: ``max_string`` when no string is longer (a
    string of n characters is n or more bytes between two quotes), else the text's."""
    if 0 < max_string < len(quoted) and (
        quoted.translate(_QUOTES_ONLY).find(b"x" * (max_string + 1)) < 0
    ):
        return max_string
    return len(quoted)


__all__ = ["Bounds", "fast_decode"]
