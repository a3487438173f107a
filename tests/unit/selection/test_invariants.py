"""Invariants over any module stack (hypothesis)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from apportion.contracts.launch import AllocationRequest, Provider
from apportion.errors import Infeasible
from tests.unit.selection.builders import candidate, final, host, select

ACCOUNT_IDS = [f"acct{i}" for i in range(6)]

base_module = st.fixed_dictionaries(
    {"module": st.sampled_from(["equal", "least_used"])},
    optional={"weighted": st.sampled_from([None, True, False])},
)
weights_module = st.fixed_dictionaries(
    {"module": st.just("weights")},
    optional={
        "weights": st.dictionaries(
            st.sampled_from(ACCOUNT_IDS), st.sampled_from([0.0, 0.5, 1.0, 3.0, 1e300])
        )
    },
)
priority_module = st.fixed_dictionaries(
    {"module": st.just("priority"), "mode": st.sampled_from(["strict", "probabilistic"])},
    optional={"strength": st.floats(0, 50)},
)
cost_module = st.fixed_dictionaries(
    {"module": st.just("cost"), "mode": st.sampled_from(["strict", "probabilistic"])},
    optional={"amount": st.floats(0, 50)},
)


def penalty_module(hard_limit: bool) -> st.SearchStrategy[dict[str, Any]]:
    optional: dict[str, st.SearchStrategy[Any]] = {
        "percent": st.floats(0, 100),
        "window_hours": st.floats(0.5, 48),
    }
    if hard_limit:
        optional["hard_limit"] = st.integers(1, 6)
    return st.fixed_dictionaries({"module": st.just("failure_penalty")}, optional=optional)


def stacks(hard_limit: bool = True) -> st.SearchStrategy[list[dict[str, Any]]]:
    adjust = st.one_of(weights_module, priority_module, cost_module, penalty_module(hard_limit))
    return st.builds(lambda b, rest: [b, *rest], base_module, st.lists(adjust, max_size=6))


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    ids = ACCOUNT_IDS[: draw(st.integers(1, len(ACCOUNT_IDS)))]
    accounts = {
        a: {
            "priority": draw(st.sampled_from([0, 1, 5])),
            "weight": draw(st.sampled_from([0, 0.5, 1, 2, 3])),
            "cost_per_hour": draw(st.sampled_from([0, 0.1, 0.4])),
            "enabled": draw(st.booleans() | st.just(True)),
        }
        for a in ids
    }
    providers: dict[str, Provider] = {}
    requests: list[AllocationRequest] = []
    for a in ids:
        for k in range(draw(st.integers(1, 3))):
            uuid = f"{a}-h{k}"
            providers[uuid] = host(
                uuid,
                a,
                vcpu=32,
                used=draw(st.integers(0, 32)),
                price=draw(st.sampled_from([None, 0.01, 0.02])),
            )
            requests.append(candidate(uuid, a, vcpu=draw(st.integers(1, 4))))
    return {
        "requests": draw(st.permutations(requests)),
        "providers": providers,
        "accounts": accounts,
        "failures": {a: draw(st.integers(0, 30)) for a in ids},
        "exclude": draw(st.lists(st.sampled_from(ids), max_size=2)),
        "seed": draw(st.integers(0, 2**63)),
    }


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(scenarios(), stacks())
def test_probabilities_are_non_negative_and_sum_to_one_in_every_group(
    scenario: dict[str, Any], policy: list[dict[str, Any]]
) -> None:
    try:
        outcome = select(policy=policy, **scenario)
    except Infeasible:
        eligible = [
            a
            for a, s in scenario["accounts"].items()
            if s["enabled"] and a not in scenario["exclude"]
        ]
        assert not eligible
        return
    selection = outcome.selection
    for group in selection["groups"]:
        assert all(p >= 0 and math.isfinite(p) for p in group["probabilities"].values())
        assert math.isclose(sum(group["probabilities"].values()), 1.0, rel_tol=1e-9)
    for step in selection["trace"]:
        assert all(p >= 0 and math.isfinite(p) for p in step["probabilities"].values())
    assert len(selection["trace"]) == len(policy)
    # Candidates: per group their probabilities also sum to 1; removed ones are at 0.
    per_group: dict[int, float] = {}
    for request in outcome.requests:
        if request["priority_group"] is None:
            assert request["probability"] == 0.0
        else:
            per_group[request["priority_group"]] = per_group.get(request["priority_group"], 0.0) + (
                request["probability"] or 0.0
            )
    assert all(math.isclose(total, 1.0, rel_tol=1e-9) for total in per_group.values())
    # The winner is in the top group, eligible, and owns the chosen candidate.
    assert selection["account"] in selection["groups"][0]["probabilities"]
    assert selection["groups"][0]["probabilities"][selection["account"]] > 0
    assert scenario["accounts"][selection["account"]]["enabled"]
    assert selection["account"] not in scenario["exclude"]
    assert outcome.requests[selection["chosen"]]["account"] == selection["account"]


@FAST
@given(scenarios(), stacks())
def test_the_same_seed_gives_the_same_outcome(
    scenario: dict[str, Any], policy: list[dict[str, Any]]
) -> None:
    try:
        first = select(policy=policy, **scenario)
    except Infeasible:
        return
    again = select(policy=policy, **scenario)
    assert again.selection == first.selection
    assert again.requests == first.requests


@FAST
@given(scenarios(), stacks(hard_limit=False), st.integers(0, 40), st.integers(1, 40))
def test_more_failures_never_raise_an_accounts_probability(
    scenario: dict[str, Any], policy: list[dict[str, Any]], fewer: int, extra: int
) -> None:
    target = next(iter(scenario["accounts"]))
    assume(scenario["accounts"][target]["enabled"] and target not in scenario["exclude"])
    low = select(policy=policy, **{**scenario, "failures": {**scenario["failures"], target: fewer}})
    high = select(
        policy=policy, **{**scenario, "failures": {**scenario["failures"], target: fewer + extra}}
    )
    assert final(high)[target] <= final(low)[target] + 1e-12
