"""Small builders for provider fixtures and candidate assertions."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest

from apportion.contracts.launch import LaunchSelectJob
from apportion.engine import Context
from apportion.errors import Rejected
from apportion.limits import Limits
from apportion.placement import CandidateSet, find_candidates

SHARES = "MISC_SHARES_VIA_AGGREGATE"

Expected = tuple[Mapping[str, Mapping[str, int]], Mapping[str, Sequence[str]]]


def rp(
    uuid: str,
    parent: str | None = None,
    *,
    traits: Iterable[str] = (),
    aggs: Iterable[str] = (),
    used: Mapping[str, int] | None = None,
    account: str | None = None,
    inv: Mapping[str, Mapping[str, Any]] | None = None,
    **totals: int,
) -> dict[str, Any]:
    """A provider; ``VCPU=4`` is shorthand for an inventory with total 4."""
    inventories: dict[str, Any] = {rc: {"total": t} for rc, t in totals.items()}
    inventories.update({rc: dict(v) for rc, v in (inv or {}).items()})
    out: dict[str, Any] = {
        "uuid": uuid,
        "parent_provider_uuid": parent,
        "inventories": inventories,
        "usages": dict(used or {}),
        "traits": list(traits),
        "aggregates": list(aggs),
    }
    if account is not None:
        out["account"] = account
    return out


def make_job(providers: Sequence[Mapping[str, Any]], request: str) -> LaunchSelectJob:
    return LaunchSelectJob.model_validate(
        {"providers": list(providers), "request": request, "policy": None}
    )


def find(
    providers: Sequence[Mapping[str, Any]], request: str, limits: Limits | None = None
) -> CandidateSet:
    ctx = Context(limits=limits) if limits is not None else Context()
    return find_candidates(make_job(providers, request), ctx)


def canon(
    allocations: Mapping[str, Mapping[str, int]], mappings: Mapping[str, Sequence[str]]
) -> str:
    """One candidate as a comparable string (mapping lists compared as sets)."""
    return json.dumps(
        {
            "allocations": {p: dict(r) for p, r in allocations.items()},
            "mappings": {s: sorted(ps) for s, ps in mappings.items()},
        },
        sort_keys=True,
    )


def got(cs: CandidateSet) -> list[str]:
    return sorted(
        canon({p: a["resources"] for p, a in r["allocations"].items()}, r["mappings"])
        for r in cs.requests
    )


def want(expected: Iterable[Expected]) -> list[str]:
    return sorted(canon(a, m) for a, m in expected)


def assert_candidates(cs: CandidateSet, expected: Iterable[Expected]) -> None:
    expected = list(expected)
    assert got(cs) == want(expected)
    assert len(cs.requests) == len(expected)


def rejection(providers: Sequence[Mapping[str, Any]], request: str) -> str:
    """The single problem message of a request rejected at path ``request``."""
    with pytest.raises(Rejected) as info:
        find(providers, request)
    assert [p.path for p in info.value.problems] == ["request"]
    return info.value.problems[0].message
