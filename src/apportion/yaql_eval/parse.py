"""Parse and check: the failure codes, the batch's result, yaql's engine and context,
and the length and syntax checks every expression passes before it is evaluated."""

from __future__ import annotations

import collections.abc  # noqa: F401  (yaql 3.2 on Python 3.11 needs it imported first)
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import yaql
from yaql.language import exceptions as yaql_exceptions

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


# How deep any walk over a parsed expression goes (deeper is neither cheap nor plain).
MAX_DEPTH = 40


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
def root_context() -> Any:
    # Building the standard library context costs ~0.1 s; each batch takes a child of it.
    # Without the date/time library: `now()` would read the clock, and engines are pure
    # functions of their input (the same job must give the same answer on redelivery).
    return yaql.create_context(datetime=False)


@lru_cache(maxsize=4096)
def parse(iterations: int, memory_quota: int, text: str) -> Any:
    # Parsed expressions are immutable trees; caching them makes repeated schemas cheap.
    return _engine(iterations, memory_quota)(text)


def warm_up(limits: Limits) -> None:
    """Build the yaql engine and context now (a worker calls this at boot; optional)."""
    _engine(limits.yaql_max_iterations, limits.yaql_memory_quota)
    root_context()


def parse_or_fail(name: str, text: str, limits: Limits) -> Any | YaqlFailure:
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
        return parse(limits.yaql_max_iterations, limits.yaql_memory_quota, text)
    except (yaql_exceptions.YaqlParsingException, yaql_exceptions.YaqlLexicalException) as exc:
        return YaqlFailure(name, SYNTAX, f"yaql syntax error: {short(exc)}")
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
        return YaqlFailure(name, SYNTAX, f"yaql syntax error: {short(exc)}")


def syntax_failure(name: str, text: str, limits: Limits) -> YaqlFailure | None:
    """Why ``text`` does not parse (or is too long), without evaluating it; None if it does."""
    found = parse_or_fail(name, text, limits)
    return found if isinstance(found, YaqlFailure) else None


def short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
