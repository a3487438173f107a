"""Builders for selection tests: candidates are made directly as AllocationRequests."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from apportion.contracts.launch import PROVIDER, Account, AllocationRequest, Provider
from apportion.limits import Limits
from apportion.selection import PolicyOutcome, apply_policy, parse_policy

NOW = datetime(2026, 11, 21, 22, 0, tzinfo=UTC)


def host(
    uuid: str,
    account: str | None = None,
    *,
    vcpu: int = 32,
    used: int = 0,
    price: float | None = None,
    parent: str | None = None,
) -> Provider:
    return PROVIDER.validate_python(
        {
            "uuid": uuid,
            "account": account,
            "parent_provider_uuid": parent,
            "inventories": {"VCPU": {"total": vcpu}} if vcpu else {},
            "usages": {"VCPU": used} if used else {},
            "prices": {"VCPU": price} if price is not None else None,
        }
    )


def candidate(provider: str, account: str, vcpu: int = 2) -> AllocationRequest:
    return {
        "allocations": {provider: {"resources": {"VCPU": vcpu}}},
        "mappings": {"": [provider]},
        "account": account,
        "priority_group": None,
        "probability": None,
        "cost_per_hour": None,
    }


def one_host_each(*accounts: str) -> tuple[list[AllocationRequest], dict[str, Provider]]:
    """One provider and one candidate per account (provider uuid = account + '-h')."""
    providers = {f"{a}-h": host(f"{a}-h", a) for a in accounts}
    return [candidate(f"{a}-h", a) for a in accounts], providers


def select(
    requests: Sequence[AllocationRequest],
    providers: Mapping[str, Provider],
    policy: Sequence[Mapping[str, Any]],
    *,
    accounts: Mapping[str, Mapping[str, Any]] | None = None,
    failures: Mapping[str, int] | None = None,
    exclude: Collection[str] = (),
    seed: int | None = 0,
    now: datetime = NOW,
    limits: Limits | None = None,
) -> PolicyOutcome:
    return apply_policy(
        requests,
        providers,
        {a: Account.model_validate(v) for a, v in (accounts or {}).items()},
        parse_policy(policy),
        failures=failures or {},
        exclude_accounts=exclude,
        seed=seed,
        now=now,
        limits=limits or Limits(),
    )


def final(outcome: PolicyOutcome) -> dict[str, float]:
    """Every account's final probability within its group."""
    return {a: p for g in outcome.selection["groups"] for a, p in g["probabilities"].items()}


def after(outcome: PolicyOutcome, index: int) -> dict[str, float]:
    return dict(outcome.selection["trace"][index]["probabilities"])


def group_members(outcome: PolicyOutcome) -> list[list[str]]:
    return [list(g["probabilities"]) for g in outcome.selection["groups"]]
