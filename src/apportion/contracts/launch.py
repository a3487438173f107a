"""launch_select job and result (docs/contract.md#launch_select)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from apportion.contracts.base import FiniteFloat, JobBase, WireModel
from apportion.contracts.policy import PolicyModule


class Inventory(WireModel):
    total: int = Field(ge=0)
    reserved: int = Field(0, ge=0)
    min_unit: int = Field(1, ge=1)
    max_unit: int | None = Field(None, ge=1, description="defaults to total")
    step_size: int = Field(1, ge=1)
    allocation_ratio: FiniteFloat = Field(1.0, gt=0)


class Provider(WireModel):
    uuid: str = Field(min_length=1, max_length=256)
    name: str | None = None
    parent_provider_uuid: str | None = None
    account: str | None = Field(None, description="defaults to the root's account")
    inventories: dict[str, Inventory] = Field(default_factory=dict)
    usages: dict[str, int] = Field(default_factory=dict)
    traits: list[str] = Field(default_factory=list)
    aggregates: list[str] = Field(default_factory=list)
    prices: dict[str, FiniteFloat] | None = None


class Account(WireModel):
    priority: FiniteFloat = 0
    weight: FiniteFloat = Field(1.0, ge=0)
    cost_per_hour: FiniteFloat = Field(0.0, ge=0)
    enabled: bool = True


class LaunchSelectJob(JobBase):
    providers: list[Provider]
    request: str = Field(description="a Placement GET /allocation_candidates query string")
    accounts: dict[str, Account] = Field(default_factory=dict)
    # Omitted → the default policy from config/; explicit null → candidates only.
    policy: list[PolicyModule] | None = Field(default=None)
    failures: dict[str, int] | None = None
    exclude_accounts: list[str] = Field(default_factory=list)
    seed: int | None = None

    @property
    def policy_given(self) -> bool:
        """True when the job carried a ``policy`` key (even ``null``)."""
        return "policy" in self.model_fields_set


# ---- result -------------------------------------------------------------------------


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a large result is built.

    A launch_select creates tens of thousands of small, long-lived, cycle-free
    objects; each automatic full collection meanwhile re-traverses all of them and
    the job's providers, which cost up to a third of the run time (bench/placement.md).
    Reference counting still frees everything; the collector is restored after.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


Out = TypeVar("Out", bound=_Out)
_new = object.__new__
_set = object.__setattr__


def trusted(cls: type[Out], values: dict[str, Any], fields_set: set[str]) -> Out:
    """An instance of the result model ``cls`` holding ``values`` as they are.

    For values the engine built itself, so already valid: a result carries up to
    tens of thousands of candidates, and validating each costs ~2.5 µs more than
    this (``model_construct`` is slower still: it looks every field up by alias).
    It does what ``model_construct`` does for these models (no extras, no private
    attributes, no post-init): ``values`` must hold every field, ``fields_set`` the
    ones a validated construction would report as set. Neither is copied: callers
    share one ``fields_set`` between all instances of a kind, which is safe because
    pydantic never changes it in place on a frozen model (``model_copy`` copies it
    first), and it saves one tracked object per instance for the garbage collector
    to traverse. tests/unit/placement/test_trusted_models.py pins the result to
    pydantic's own.
    """
    instance = _new(cls)
    _set(instance, "__dict__", values)
    _set(instance, "__pydantic_fields_set__", fields_set)
    _set(instance, "__pydantic_extra__", None)
    _set(instance, "__pydantic_private__", None)
    return instance


class ProviderAllocation(_Out):
    resources: dict[str, int]


class AllocationRequest(_Out):
    """One allocation candidate, as Placement returns it, plus selection fields.

    ``mappings`` maps each request group suffix (``""`` for the unsuffixed group)
    to the providers that satisfy it; a resourceless group's provider appears
    there but not in ``allocations``. ``account`` is the account of the root of
    the non-sharing tree the candidate is anchored at.
    """

    allocations: dict[str, ProviderAllocation]
    mappings: dict[str, list[str]]
    account: str | None = None
    priority_group: int | None = None
    probability: float | None = None
    cost_per_hour: float | None = None


class ResourceSummary(_Out):
    capacity: int
    used: int


class ProviderSummary(_Out):
    """A provider of a tree some returned candidate touches: every resource class it
    has inventory of (``{}`` when none), its traits (sorted), parent and root."""

    resources: dict[str, ResourceSummary]
    traits: list[str]
    parent_provider_uuid: str | None
    root_provider_uuid: str


class PriorityGroup(_Out):
    priority: int = Field(description="the group's rank: 0 is the most preferred")
    probabilities: dict[str, float]


class TraceStep(_Out):
    module: str
    probabilities: dict[str, float] = Field(
        description="every account's probability within its group, groups in order"
    )
    groups: list[dict[str, float]] = Field(
        default_factory=list,
        description="the same probabilities split by priority group (most preferred first)",
    )
    note: str | None = None


class Selection(_Out):
    chosen: int
    account: str
    roll: float
    groups: list[PriorityGroup]
    trace: list[TraceStep]


class LaunchAttempt(_Out):
    """One launch tried by the worker's launcher hook (``launcher`` in config)."""

    attempt: int
    account: str
    chosen: int
    roll: float
    probabilities: dict[str, float] = Field(description="the dice's group at this attempt")
    failures: dict[str, int] | None = Field(
        None, description="failure counts from the history store this selection used"
    )
    ok: bool
    reason: str | None = None


class LaunchSelectResult(_Out):
    allocation_requests: list[AllocationRequest]
    provider_summaries: dict[str, ProviderSummary]
    selection: Selection | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    # Set only when the worker runs a launcher: every attempt, and whether one succeeded.
    attempts: list[LaunchAttempt] | None = None
    launched: bool | None = None

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """pydantic's ``model_dump``, with the cyclic garbage collector paused.

        Dumping 20,000 candidates creates some 400,000 dicts and lists, all kept:
        the collector's automatic full passes over them (and everything else alive)
        cost 3-4x the dump itself (bench/placement.md). The output has no cycles.
        """
        with cyclic_gc_paused():
            return super().model_dump(**kwargs)
