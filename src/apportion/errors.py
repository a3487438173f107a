"""The one error hierarchy of apportion.

Two branches, and the branch decides what the worker does:

* :class:`DomainError` — the job itself is the problem (``rejected``) or it has no
  answer (``infeasible``). Deterministic: running it again gives the same outcome,
  so these are turned into result envelopes and **never retried**.
* :class:`InfrastructureError` — something around the job failed (Redis down, a
  connection reset). Transient by nature, so the task layer **retries** these with
  backoff. The engine never raises them; ``workers/`` wraps redis-py errors into them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a job, located by a JSON path such as ``schema[2].size``."""

    path: str
    message: str


class ApportionError(Exception):
    """Base of every error apportion raises on purpose."""


class DomainError(ApportionError):
    """The outcome is decided by the job's content; retrying cannot change it."""

    code: str = "domain_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class Rejected(DomainError):
    """The job is invalid. ``problems`` lists every problem with its JSON path."""

    code = "invalid_job"

    def __init__(
        self,
        message: str,
        problems: Iterable[Problem] = (),
        *,
        code: str | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.problems: tuple[Problem, ...] = tuple(problems)

    @classmethod
    def at(cls, path: str, message: str, *, code: str | None = None) -> Rejected:
        """A rejection with a single problem at ``path``; the message names the path."""
        return cls(f"{path}: {message}", [Problem(path, message)], code=code)

    @classmethod
    def of(
        cls, problems: Iterable[Problem], *, found: int | None = None, code: str | None = None
    ) -> Rejected:
        """A rejection listing ``problems``; the message names the first and counts the rest.

        ``found``: how many problems there were in all, when only some are listed.
        """
        listed = tuple(problems)
        return cls(summary(listed, found), listed, code=code)


class Infeasible(DomainError):
    """The job is valid but has no answer; the message says what a user can change."""

    code = "infeasible"

    def __init__(
        self,
        message: str,
        problems: Iterable[Problem] = (),
        *,
        code: str | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.problems: tuple[Problem, ...] = tuple(problems)


class InfrastructureError(ApportionError):
    """A transient failure outside the job (broker, store). Retried with backoff."""


class StoreUnavailable(InfrastructureError):
    """A Redis-backed store or publisher could not be reached."""


def summary(problems: tuple[Problem, ...], found: int | None = None) -> str:
    """``"schema[2].size: must be positive (and 3 more)"``: the first problem, then a count."""
    first = problems[0]
    others = (len(problems) if found is None else found) - 1
    more = f" (and {others} more)" if others > 0 else ""
    return f"{first.path}: {first.message}{more}"


def json_path(loc: Iterable[str | int]) -> str:
    """Render a pydantic/JSON location as ``a.b[2].c`` (the form used in every detail)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif out:
            out += f".{part}"
        else:
            out = str(part)
    return out or "$"
