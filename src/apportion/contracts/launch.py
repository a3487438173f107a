"""launch_select job and result (SPEC.md §2.3)."""

from __future__ import annotations

from typing import Any

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
