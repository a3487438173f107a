"""Parsing of attribute and fact values, with the reference's conventions.

Candlepin keeps every attribute and fact as a string. The rules read them with
JavaScript's loose conversions (``parseInt``, truthiness); this module gives the
same readings for well-formed values and turns malformed sizes into problems
with the JSON path of the offending field, because a size that is not a number
would silently disable a check in the reference (``parseInt("abc")`` is NaN and
every comparison with NaN is false) or loop forever (an unlimited pool whose
size parses to 0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from apportion.errors import Problem

_WHOLE = re.compile(r"\s*\d+\s*\Z", re.ASCII)
_DECIMAL = re.compile(r"\s*\d+(?:\.\d+)?\s*\Z", re.ASCII)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

UNLIMITED = "unlimited"


def key_path(base: str, key: str) -> str:
    """``base.key`` for plain keys, ``base["key"]`` for keys such as ``cpu.cpu_socket(s)``."""
    if _IDENTIFIER.match(key):
        return f"{base}.{key}"
    escaped = key.replace("\\", "\\\\").replace('"', '\\"')
    return f'{base}["{escaped}"]'


@dataclass(slots=True)
class ProblemLog:
    """Collects every problem of a job so that one rejection lists them all."""

    problems: list[Problem]

    @classmethod
    def new(cls) -> ProblemLog:
        return cls([])

    def add(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def __bool__(self) -> bool:
        return bool(self.problems)


def whole_number(
    raw: str,
    path: str,
    log: ProblemLog,
    *,
    allow_minus_one: bool = False,
    allow_unlimited: bool = False,
) -> int:
    """A pool attribute that must be a non-negative whole number (``-1`` allowed where it
    means unlimited; the word ``unlimited`` is read by the caller where it is allowed).

    Returns 0 for a malformed value after logging it; the job is rejected anyway.
    """
    text = raw.strip()
    if allow_minus_one and text == "-1":
        return -1
    if not _WHOLE.match(raw):
        expected = "a non-negative whole number"
        if allow_minus_one:
            expected += " or -1 (unlimited)"
        elif allow_unlimited:
            expected += ' or "unlimited"'
        log.add(path, f"must be {expected}, got {raw!r}")
        return 0
    return int(text)


def fact_number(raw: str, path: str, log: ProblemLog) -> Fraction:
    """A consumer fact read as a non-negative number (facts may carry decimals, e.g. TB)."""
    if not _DECIMAL.match(raw):
        log.add(path, f"must be a non-negative number, got {raw!r}")
        return Fraction(0)
    return Fraction(raw.strip())


def split_values(raw: str | None) -> frozenset[str]:
    """A syspurpose value list: comma separated, trimmed, compared case-insensitively."""
    if raw is None:
        return frozenset()
    return frozenset(part.strip().lower() for part in raw.split(",") if part.strip())


def is_true(raw: str | None) -> bool:
    """Candlepin's ``equalsIgnoreCase("true", value)``."""
    return raw is not None and raw.lower() == "true"
