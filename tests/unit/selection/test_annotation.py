"""Annotated candidates: the fast copy equals pydantic's own, and costs stay finite."""

from __future__ import annotations

import math

from apportion.contracts.launch import AllocationRequest, ProviderAllocation
from apportion.selection.annotate import annotate
from tests.unit.selection.builders import candidate, final, host, select


def test_the_fast_copy_equals_model_copy_and_leaves_the_original_alone() -> None:
    original = AllocationRequest(
        allocations={"cn": ProviderAllocation(resources={"VCPU": 2})},
        mappings={"_C": ["cn"]},
        account="acct",
    )
    (copy,) = annotate([original], {"acct": (1, 0.25)}, [0.5])
    expected = original.model_copy(
        update={"priority_group": 1, "probability": 0.25, "cost_per_hour": 0.5}
    )
    assert copy == expected
    assert copy.model_fields_set == expected.model_fields_set
    assert copy.model_dump(mode="json") == expected.model_dump(mode="json")
    assert original.priority_group is None
    assert original.probability is None
    again = copy.model_copy(update={"probability": 0.5})
    assert again.probability == 0.5
    assert copy.probability == 0.25


def test_absurd_prices_give_finite_costs_and_valid_probabilities() -> None:
    providers = {
        "big": host("big", "a", price=1e308),
        "neg": host("neg", "b", price=-1e308),
        "ok": host("ok", "c", price=0.01),
    }
    requests = [candidate("big", "a", vcpu=4), candidate("neg", "b", vcpu=4), candidate("ok", "c")]
    for mode in ("strict", "probabilistic"):
        outcome = select(
            requests, providers, [{"module": "equal"}, {"module": "cost", "mode": mode}]
        )
        assert all(math.isfinite(r.cost_per_hour or 0.0) for r in outcome.requests)
        for group in outcome.selection.groups:
            assert math.isclose(sum(group.probabilities.values()), 1.0)
        assert all(math.isfinite(p) for p in final(outcome).values())
