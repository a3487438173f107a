"""A policy version tried before it is saved: the dry run of ``policy set`` and the studio.

A policy the store accepts is well formed (apportion.selection.stored), but it can still
fail on every job of its pool: an expression dividing by zero, reading a field no
account has, or running past the yaql time limit. So a save first runs the version,
as launch_select would, on the pool's recent deployables:

* the newest launch_select jobs the workers kept (workers/studio/recent.py) whose pool
  this version decides: jobs naming the pool, or, for ``default``, jobs naming no pool,
  ``default``, or a pool without its own policy;
* the examples folder's ``launch_select*.json`` jobs (the studio's and the CLI's
  ``--examples``, ``./examples`` when present).

Each is ``ok`` or ``rejected`` with the engine's code and reason. A job the engine
rejects or finds infeasible whatever the policy (malformed, no allocation candidate) is
``skipped``: it says nothing about the version. A version that rejects every
deployable it was tried on is refused unless forced; one tried on nothing is saved
(there is nothing to judge it by, and the report says so).

At most :data:`MAX_TRIED` deployables are tried, recent jobs first, so a save stays a
matter of seconds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apportion.codec import encode
from apportion.contracts.policy import DEFAULT_POOL
from apportion.engine import error_info, parse_json_text
from apportion.errors import ApportionError, DomainError
from apportion.limits import Limits
from apportion.selection.stored import validate_policy
from apportion.workers.studio import deployable as dep

# Deployables a dry run tries at most (recent jobs first, then examples).
MAX_TRIED = 25


@dataclass(frozen=True)
class Source:
    """A deployable a dry run may try: ``load`` gives it with its candidates computed
    (raising the engine's DomainError for a job no policy could answer)."""

    id: str
    label: str
    load: Callable[[], dep.Deployable]


@dataclass(frozen=True)
class Trial:
    id: str
    label: str
    outcome: str  # "ok", "rejected" or "skipped"
    code: str | None = None
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "label": self.label,
            "outcome": self.outcome,
            "code": self.code,
            "reason": self.reason,
        }

    def line(self) -> str:
        why = f": {self.code}: {self.reason}" if self.reason else ""
        return f"  {self.outcome:<8} {self.label}{why}"


@dataclass(frozen=True)
class DryRun:
    pool: str
    trials: tuple[Trial, ...]

    @property
    def tried(self) -> int:
        return sum(t.outcome != "skipped" for t in self.trials)

    @property
    def rejected(self) -> int:
        return sum(t.outcome == "rejected" for t in self.trials)

    @property
    def refuses(self) -> bool:
        """The version rejects every deployable it was tried on (and was tried on one)."""
        return self.tried > 0 and self.rejected == self.tried

    def summary(self) -> str:
        if not self.tried:
            return f"dry run: no recent job of pool {self.pool!r} and no example to try it on"
        return (
            f"dry run on pool {self.pool!r}: ok on {self.tried - self.rejected}, "
            f"rejected by {self.rejected} of {self.tried} deployables"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "tried": self.tried,
            "rejected": self.rejected,
            "refuses": self.refuses,
            "summary": self.summary(),
            "deployables": [t.as_dict() for t in self.trials],
        }

    def lines(self) -> list[str]:
        return [self.summary(), *(t.line() for t in self.trials)]


def decides(pool: str, job_pool: Any, has_own_policy: Callable[[str], bool]) -> bool:
    """Whether a job naming ``job_pool`` gets pool ``pool``'s policy from the store."""
    if not isinstance(job_pool, str) or job_pool in ("", DEFAULT_POOL):
        return pool == DEFAULT_POOL
    if job_pool == pool:
        return True
    return pool == DEFAULT_POOL and not has_own_policy(job_pool)


def sources(
    pool: str,
    *,
    recent: Sequence[tuple[str, str, Any]],
    examples: Path | None,
    limits: Limits,
    has_own_policy: Callable[[str], bool],
    load: Callable[[str, str, str, Callable[[], Any]], dep.Deployable] | None = None,
) -> list[Source]:
    """The deployables a save of ``pool`` is tried on: ``recent`` (id, label, job data;
    newest first) the pool decides, then the examples, at most MAX_TRIED.

    ``load(id, label, source, job)`` builds a deployable (the studio passes its cache);
    by default each is validated and its candidates computed afresh.
    """
    build = load or _fresh(limits)
    out: list[Source] = []
    for ident, label, job in recent:
        job_pool = job.get("pool") if isinstance(job, dict) else None
        if decides(pool, job_pool, has_own_policy):
            out.append(Source(ident, label, _bind(build, ident, label, "recent", _constant(job))))
    for ident, label, read in example_jobs(examples, limits):
        out.append(Source(ident, label, _bind(build, ident, label, "example", read)))
    return out[:MAX_TRIED]


def recent_entry(job: Any) -> tuple[str, str, Any]:
    """A kept recent job as (id, label, job): ``recent:<digest>``, ``recent: <job_id>``."""
    digest = hashlib.sha256(encode(job)).hexdigest()[:24]
    job_id = job.get("job_id") if isinstance(job, dict) else None
    return f"recent:{digest}", f"recent: {job_id or digest[:12]}", job


def example_jobs(
    folder: Path | None, limits: Limits
) -> Iterator[tuple[str, str, Callable[[], Any]]]:
    """The folder's launch_select*.json jobs (envelopes left out): id, label, reader."""
    if folder is None or not folder.is_dir():
        return
    for path in sorted(folder.glob("launch_select*.json")):
        if path.name.endswith(".envelope.json"):
            continue
        yield f"example:{path.name}", f"examples/{path.name}", _reader(path, limits)


def dry_run(
    pool: str,
    raw_policy: Any,
    tried_on: Iterable[Source],
    *,
    limits: Limits,
    failures: dep.FailureCounts | None = None,
) -> DryRun:
    """Run ``raw_policy`` on each deployable of ``tried_on`` as launch_select would.

    Raises :class:`Rejected` (naming the field) for a policy the store would refuse
    whatever the jobs, before trying any.
    """
    validate_policy(raw_policy, limits)
    trials: list[Trial] = []
    for source in tried_on:
        try:
            deployable = source.load()
        except DomainError as exc:
            info = error_info(exc)
            trials.append(Trial(source.id, source.label, "skipped", info.code, info.message))
            continue
        try:
            dep.evaluate(deployable, raw_policy, limits=limits, failures=failures)
        except DomainError as exc:
            info = error_info(exc)
            trials.append(Trial(source.id, source.label, "rejected", info.code, info.message))
            continue
        trials.append(Trial(source.id, source.label, "ok"))
    return DryRun(pool, tuple(trials))


class RefusedByDryRun(ApportionError):
    """The version rejects every deployable it was tried on, and the save was not forced.

    Not a DomainError: nothing is wrong with the request, the administrator is asked to
    confirm (the CLI exits 4, the studio answers 409 with the report).
    """

    def __init__(self, report: DryRun) -> None:
        self.message = (
            f"not saved: this version rejects all {report.rejected} deployables it was tried on"
        )
        super().__init__(self.message)
        self.report = report


def _fresh(limits: Limits) -> Callable[[str, str, str, Callable[[], Any]], dep.Deployable]:
    def build(ident: str, label: str, source: str, job: Callable[[], Any]) -> dep.Deployable:
        return dep.load(job(), ident=ident, label=label, source=source, limits=limits)

    return build


def _bind(
    build: Callable[[str, str, str, Callable[[], Any]], dep.Deployable],
    ident: str,
    label: str,
    source: str,
    job: Callable[[], Any],
) -> Callable[[], dep.Deployable]:
    return lambda: build(ident, label, source, job)


def _constant(job: Any) -> Callable[[], Any]:
    return lambda: job


def _reader(path: Path, limits: Limits) -> Callable[[], Any]:
    def read() -> Any:
        return parse_json_text(path.read_bytes(), limits)

    return read
