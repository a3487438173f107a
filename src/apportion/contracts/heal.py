"""heal_org jobs and results: auto_attach over every consumer of an organisation, in turn.

A consumer entry's fields mean what they mean in an auto_attach job (the same models,
the same camelCase aliases); the pools are the organisation's, shared by every consumer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

from apportion.contracts.attach import Consumer, Entitlement, Pool, ProductId, Rules
from apportion.contracts.base import JobBase, WireModel, alias
from apportion.errors import Rejected


class HealConsumer(WireModel):
    consumer: Consumer
    entitlements: list[Entitlement] = Field(default_factory=list)
    products: list[ProductId] | None = None
    # As in auto_attach: the uuid of a guest's host when known (requires_host pools).
    host_uuid: str | None = Field(
        default=None, validation_alias=alias("host_uuid", "hostUuid"), min_length=1, max_length=256
    )


class HealOrgJob(JobBase):
    consumers: list[HealConsumer] = Field(default_factory=list)
    pools: list[Pool] = Field(default_factory=list)
    at: datetime | None = None
    rules: Rules = "seed"
    # Consumers (by uuid) whose answers carry auto_attach's full explanation
    # (`apportion explain --consumer`); the others carry none, to keep the answer small.
    explain: list[str] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CheckedHealOrg:
    """A heal_org job as its engine reads it, checked at the edge: the job, and the
    rejection of each consumer entry whose own fields are wrong, by its index (the loop
    answers it in its turn, and goes on)."""

    job: HealOrgJob
    rejected: Mapping[int, Rejected]


# ---- results ------------------------------------------------------------------------


class ComplianceSummary(TypedDict):
    status: Literal["valid", "partial", "invalid"]
    compliant_products: list[str]
    partially_compliant_products: list[str]
    non_compliant_products: list[str]
    partial_stacks: list[str]


class HealError(TypedDict):
    code: str
    message: str
    details: list[dict[str, str]]


class HealConsumerResult(TypedDict):
    index: int
    consumer: str | None
    status: Literal["ok", "rejected"]
    pool_quantities: NotRequired[dict[str, int]]
    covered_products: NotRequired[list[str]]
    uncovered_products: NotRequired[list[str]]
    compliance_before: NotRequired[ComplianceSummary]
    compliance_after: NotRequired[ComplianceSummary]
    explanation: NotRequired[dict[str, Any]]
    error: NotRequired[HealError]


class HealSummary(TypedDict):
    consumers: int
    answered: int
    healed: int
    already_compliant: int
    still_not_compliant: int
    rejected: int
    entitlements_attached: int
    pools_exhausted: list[str]
    complete: bool
    stopped_at: int | None
    stopped_reason: str | None


class HealOrgResult(TypedDict):
    consumers: list[HealConsumerResult]
    consumed: dict[str, int]
    summary: HealSummary
