"""Result models built without validation (``contracts.launch.trusted``) are exactly
pydantic's own, and the cyclic garbage collector is always restored."""

from __future__ import annotations

import gc
import json

import pytest

from apportion.contracts.launch import (
    AllocationRequest,
    LaunchSelectResult,
    ProviderAllocation,
    ProviderSummary,
    ResourceSummary,
    cyclic_gc_paused,
    trusted,
)
from tests.unit.placement.helpers import SHARES, find, rp


def farm() -> list[dict[str, object]]:
    """::

    SS (DISK_GB 100, shares via agg)
     : agg
    CN1 ── numa1 (VCPU 4, MEMORY_MB 2048, HW_NUMA_ROOT)
    """
    return [
        rp("SS", traits=[SHARES], aggs=["agg"], DISK_GB=100),
        rp("CN1", aggs=["agg"], account="acme"),
        rp("numa1", "CN1", traits=["HW_NUMA_ROOT"], used={"VCPU": 1}, VCPU=4, MEMORY_MB=2048),
    ]


def test_a_trusted_request_equals_a_validated_one_field_by_field() -> None:
    values = {
        "allocations": {"cn": ProviderAllocation(resources={"VCPU": 2})},
        "mappings": {"": ["cn"]},
        "account": "acct",
        "priority_group": None,
        "probability": None,
        "cost_per_hour": None,
    }
    built = trusted(AllocationRequest, dict(values), {"allocations", "mappings", "account"})
    validated = AllocationRequest(
        allocations=values["allocations"], mappings={"": ["cn"]}, account="acct"
    )
    assert built == validated
    assert built.model_fields_set == validated.model_fields_set
    assert built.model_dump_json() == validated.model_dump_json()
    assert built.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)
    assert repr(built) == repr(validated)
    with pytest.raises(ValueError, match="frozen"):
        built.account = "other"  # type: ignore[misc]


def test_a_shared_fields_set_is_never_changed_by_copying_one_instance() -> None:
    shared = {"allocations", "mappings", "account"}
    values: dict[str, object] = {
        "allocations": {},
        "mappings": {},
        "account": "a",
        "priority_group": None,
        "probability": None,
        "cost_per_hour": None,
    }
    first = trusted(AllocationRequest, dict(values), shared)
    second = trusted(AllocationRequest, dict(values), shared)
    copy = first.model_copy(update={"probability": 0.5})
    assert copy.probability == 0.5
    assert copy.model_fields_set == shared | {"probability"}
    assert shared == {"allocations", "mappings", "account"}
    assert second.model_fields_set == shared
    assert first.probability is None


def test_every_object_the_engine_builds_survives_revalidation_unchanged() -> None:
    cs = find(farm(), "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10")
    requests = cs.requests
    assert len(requests) == 1
    for request in requests:
        again = AllocationRequest.model_validate(request.model_dump(exclude_unset=True))
        assert again == request
        assert again.model_fields_set == request.model_fields_set
        for allocation in request.allocations.values():
            assert ProviderAllocation.model_validate(allocation.model_dump()) == allocation
    assert set(cs.provider_summaries) == {"SS", "CN1", "numa1"}
    for summary in cs.provider_summaries.values():
        again_summary = ProviderSummary.model_validate(summary.model_dump())
        assert again_summary == summary
        assert again_summary.model_fields_set == summary.model_fields_set
        for resource in summary.resources.values():
            assert ResourceSummary.model_validate(resource.model_dump()) == resource
    numa = cs.provider_summaries["numa1"]
    assert numa.resources["VCPU"] == ResourceSummary(capacity=4, used=1)
    assert numa.traits == ["HW_NUMA_ROOT"]
    assert (numa.parent_provider_uuid, numa.root_provider_uuid) == ("CN1", "CN1")


def test_dumping_a_result_restores_the_collector_whatever_its_state() -> None:
    cs = find(farm(), "resources=VCPU:1")
    result = LaunchSelectResult(
        allocation_requests=cs.requests, provider_summaries=cs.provider_summaries
    )
    was = gc.isenabled()
    try:
        gc.enable()
        dumped = result.model_dump(mode="json")
        assert gc.isenabled()
        gc.disable()
        assert result.model_dump(mode="json") == dumped
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()
    assert json.loads(result.model_dump_json()) == dumped
    assert dumped["allocation_requests"] == [
        {
            "allocations": {"numa1": {"resources": {"VCPU": 1}}},
            "mappings": {"": ["numa1"]},
            "account": "acme",
            "priority_group": None,
            "probability": None,
            "cost_per_hour": None,
        }
    ]


def test_the_collector_is_restored_when_the_paused_block_raises() -> None:
    def fail_paused() -> None:
        with cyclic_gc_paused():
            assert not gc.isenabled()
            raise RuntimeError("boom")

    was = gc.isenabled()
    gc.enable()
    try:
        with pytest.raises(RuntimeError, match="boom"):
            fail_paused()
        assert gc.isenabled()
    finally:
        if not was:
            gc.disable()
