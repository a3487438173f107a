"""failure_penalty, priority and cost modules, with the seed's worked numbers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.selection.builders import (
    candidate,
    final,
    group_members,
    host,
    one_host_each,
    select,
)

THREE = ("a", "b", "c")
PENALTY = {"module": "failure_penalty", "percent": 5, "window_hours": 6}


def test_three_failures_at_five_percent_fine_fifteen_points_then_renormalise() -> None:
    requests, providers = one_host_each(*THREE)
    outcome = select(requests, providers, [{"module": "equal"}, PENALTY], failures={"a": 3})
    assert final(outcome) == pytest.approx(
        {"a": (1 / 3 - 0.15) / 0.85, "b": (1 / 3) / 0.85, "c": (1 / 3) / 0.85}
    )
    assert final(outcome)["a"] == pytest.approx(0.2156862745)


def test_a_fine_never_takes_probability_below_zero() -> None:
    requests, providers = one_host_each(*THREE)
    outcome = select(requests, providers, [{"module": "equal"}, PENALTY], failures={"a": 50})
    assert final(outcome) == pytest.approx({"a": 0.0, "b": 0.5, "c": 0.5})


def test_a_group_fined_to_zero_falls_back_to_equal_and_the_trace_says_so() -> None:
    requests, providers = one_host_each("a", "b")
    outcome = select(
        requests, providers, [{"module": "equal"}, PENALTY], failures={"a": 20, "b": 30}
    )
    assert final(outcome) == pytest.approx({"a": 0.5, "b": 0.5})
    note = outcome.selection["trace"][1]["note"] or ""
    assert "group 0 (a, b): every account at 0, equal within the group" in note


def test_hard_limit_moves_an_account_to_a_last_resort_group_behind_strict_priority() -> None:
    requests, providers = one_host_each(*THREE)
    outcome = select(
        requests,
        providers,
        [{"module": "equal"}, {**PENALTY, "hard_limit": 3}, {"module": "priority"}],
        accounts={"a": {"priority": 9}, "b": {"priority": 5}},
        failures={"a": 3, "c": 2},
    )
    # a has the highest priority but reached the hard limit: last resort, after c's group.
    assert group_members(outcome) == [["b"], ["c"], ["a"]]
    assert final(outcome) == pytest.approx({"a": 1.0, "b": 1.0, "c": 1.0})
    assert outcome.selection["account"] == "b"


def test_strict_priority_makes_one_group_per_priority_highest_first() -> None:
    requests, providers = one_host_each(*THREE)
    policy = [{"module": "equal"}, {"module": "priority", "mode": "strict"}]
    accounts = {"a": {"priority": 5}, "b": {"priority": 5}, "c": {"priority": 1}}
    outcome = select(requests, providers, policy, accounts=accounts)
    assert group_members(outcome) == [["a", "b"], ["c"]]
    assert final(outcome) == pytest.approx({"a": 0.5, "b": 0.5, "c": 1.0})
    assert [r["priority_group"] for r in outcome.requests] == [0, 0, 1]


def test_strict_priority_always_picks_the_top_group() -> None:
    requests, providers = one_host_each(*THREE)
    policy = [{"module": "equal"}, {"module": "priority", "mode": "strict"}]
    accounts = {"a": {"priority": 5}, "b": {"priority": 5}, "c": {"priority": 1}}
    chosen = {
        select(requests, providers, policy, accounts=accounts, seed=s).selection["account"]
        for s in range(100)
    }
    assert chosen == {"a", "b"}


def test_probabilistic_priority_divides_by_one_plus_strength_per_step() -> None:
    requests, providers = one_host_each(*THREE)
    policy: list[dict[str, Any]] = [
        {"module": "equal"},
        {"module": "priority", "mode": "probabilistic", "strength": 1},
    ]
    accounts = {"a": {"priority": 10}, "b": {"priority": 5}, "c": {"priority": -3}}
    outcome = select(requests, providers, policy, accounts=accounts)
    assert final(outcome) == pytest.approx({"a": 4 / 7, "b": 2 / 7, "c": 1 / 7})
    assert group_members(outcome) == [["a", "b", "c"]]


def test_probabilistic_priority_with_strength_zero_changes_nothing() -> None:
    requests, providers = one_host_each(*THREE)
    policy: list[dict[str, Any]] = [
        {"module": "equal"},
        {"module": "priority", "mode": "probabilistic", "strength": 0},
    ]
    outcome = select(requests, providers, policy, accounts={"a": {"priority": 10}})
    assert final(outcome) == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})


def test_candidate_cost_is_account_cost_plus_amount_times_price() -> None:
    providers = {"h": host("h", "ec2", price=0.02), "p": host("p", "private")}
    requests = [candidate("h", "ec2", vcpu=4), candidate("p", "private", vcpu=4)]
    outcome = select(
        requests, providers, [{"module": "equal"}], accounts={"ec2": {"cost_per_hour": 0.4}}
    )
    assert [r["cost_per_hour"] for r in outcome.requests] == pytest.approx([0.48, 0.0])


def test_strict_cost_groups_cheapest_first_and_picks_the_cheapest() -> None:
    providers = {
        "a1": host("a1", "a", price=0.01),
        "a2": host("a2", "a", price=0.03),  # account a costs (0.02 + 0.06) / 2 = 0.04 mean
        "b1": host("b1", "b", price=0.015),  # 0.03: cheapest
        "c1": host("c1", "c", price=0.05),  # 0.10
    }
    requests = [
        candidate("a1", "a"),
        candidate("a2", "a"),
        candidate("b1", "b"),
        candidate("c1", "c"),
    ]
    policy = [{"module": "equal"}, {"module": "cost", "mode": "strict"}]
    assert group_members(select(requests, providers, policy)) == [["b"], ["a"], ["c"]]
    chosen = {select(requests, providers, policy, seed=s).selection["account"] for s in range(50)}
    assert chosen == {"b"}


def test_probabilistic_cost_divides_the_dearest_by_one_plus_amount() -> None:
    requests, providers = one_host_each(*THREE)
    policy: list[dict[str, Any]] = [
        {"module": "equal"},
        {"module": "cost", "mode": "probabilistic", "amount": 1},
    ]
    accounts: dict[str, dict[str, Any]] = {
        "a": {"cost_per_hour": 0},
        "b": {"cost_per_hour": 0.5},
        "c": {"cost_per_hour": 1},
    }
    outcome = select(requests, providers, policy, accounts=accounts)
    raw = {"a": 1.0, "b": 2**-0.5, "c": 0.5}
    total = sum(raw.values())
    assert final(outcome) == pytest.approx({k: v / total for k, v in raw.items()})
    assert final(outcome)["c"] / final(outcome)["a"] == pytest.approx(0.5)


def test_costs_equal_up_to_float_noise_share_a_strict_cost_group() -> None:
    requests, providers = one_host_each("a", "b")
    policy = [{"module": "equal"}, {"module": "cost", "mode": "strict"}]
    accounts = {"a": {"cost_per_hour": 0.1 + 0.2}, "b": {"cost_per_hour": 0.3}}
    assert group_members(select(requests, providers, policy, accounts=accounts)) == [["a", "b"]]
