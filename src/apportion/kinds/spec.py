"""What one job kind is: the single record everything else is derived from."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apportion.limits import Limits


@dataclass(frozen=True, slots=True)
class JobKind:
    """One job kind: its contract, its engine, where it runs and how it is shown.

    Task names, queue routing, time limits, CLI choices, JSON Schemas, the docs, the
    demo and ``apportion explain`` are all read from these records, so adding a kind is
    one entry (plus its engine). Functions are named as ``"module:attribute"`` strings
    and imported on first use: reading the registry must stay cheap (``apportion
    --help`` may not load scipy).
    """

    name: str
    summary: str  # the question it answers, one line (CLI help, README, docs)
    job: type[Any]  # the pydantic model a job is validated against, once, at the edge
    result: Any  # the type of the envelope's `result` (model or TypedDict), for schemas
    solver: str  # "module:function": (validated job, Context) -> result as plain data
    queue: str
    soft_time_limit: float  # seconds; the job is answered `rejected` (time_limit)
    time_limit: float  # seconds; the pool child is killed
    id_field: str = "job_id"  # the payload field that is the idempotency key
    # "module:function" (validated job, Limits) -> what the solver is given: the checks
    # the model's types cannot express (sizes against the limits, numbers written as
    # text, one field against another), run once at the edge, after the model; raises
    # Rejected. Without one, the solver is given the validated job.
    check: str | None = None
    # Task hooks by name (apportion.tasks.hooks), applied after the engine answered.
    hooks: tuple[str, ...] = ()
    # "module:function" (result, out path | None, rich Console) -> written path | None:
    # a table on the console, and a picture when `out` is given and the kind draws one.
    explain: str | None = None
    # "module:attribute": a list of (title, job) the embedded demo runs.
    demo_jobs: str | None = None

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name != self.name.lower():
            raise ValueError(f"job kind name {self.name!r} must be a lower-case identifier")
        if not 0 < self.soft_time_limit < self.time_limit:
            raise ValueError(
                f"{self.name}: soft time limit {self.soft_time_limit} must be positive and "
                f"below the hard limit {self.time_limit}"
            )

    @property
    def task_name(self) -> str:
        """The Celery task name producers in any language send by."""
        return f"apportion.{self.name}"

    def load_solver(self) -> Any:
        return load(self.solver)

    def checked(self, job: Any, limits: Limits) -> Any:
        """What the solver reads: ``job`` (validated by :attr:`job`) after :attr:`check`."""
        return job if self.check is None else load(self.check)(job, limits)


@cache
def load(target: str) -> Any:
    """The attribute named by ``"module:attribute"`` (imported once)."""
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)
