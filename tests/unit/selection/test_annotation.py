"""Annotated candidates: a copy with the selection fields, and costs stay finite."""

from __future__ import annotations

import math

from apportion.selection.annotate import annotate
from tests.unit.selection.builders import candidate, final, host, select


def test_an_annotated_copy_adds_the_selection_fields_and_leaves_the_original_alone() -> None:
    original = candidate("cn", "acct")
    (copy,) = annotate([original], {"acct": (1, 0.25)}, [0.5])
    assert copy == {
        "allocations": {"cn": {"resources": {"VCPU": 2}}},
        "mappings": {"": ["cn"]},
        "account": "acct",
        "priority_group": 1,
        "probability": 0.25,
        "cost_per_hour": 0.5,
    }
    assert list(copy) == list(original)
    assert (original["priority_group"], original["probability"]) == (None, None)
    assert original["cost_per_hour"] is None


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
        assert all(math.isfinite(r["cost_per_hour"] or 0.0) for r in outcome.requests)
        for group in outcome.selection["groups"]:
            assert math.isclose(sum(group["probabilities"].values()), 1.0)
        assert all(math.isfinite(p) for p in final(outcome).values())
