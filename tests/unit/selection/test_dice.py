"""The dice: seeded draws, spillover on exclusion, disabled accounts, candidates."""

from __future__ import annotations

from collections import Counter

import pytest

from apportion.errors import Infeasible
from tests.unit.selection.builders import (
    candidate,
    final,
    group_members,
    host,
    one_host_each,
    select,
)

THREE = ("a", "b", "c")
EQUAL = [{"module": "equal"}]
STRICT = [{"module": "equal"}, {"module": "priority", "mode": "strict"}]
TIERS = {"a": {"priority": 10}, "b": {"priority": 10}, "c": {"priority": 1}}


def test_the_same_seed_gives_the_same_choice_and_roll() -> None:
    requests, providers = one_host_each(*THREE)
    for seed in (0, 7, 42, 2**40):
        first = select(requests, providers, EQUAL, seed=seed).selection
        again = select(requests, providers, EQUAL, seed=seed).selection
        assert (again["chosen"], again["account"], again["roll"]) == (
            first["chosen"],
            first["account"],
            first["roll"],
        )


def test_seed_42_rolls_python_randoms_first_number() -> None:
    requests, providers = one_host_each(*THREE)
    selection = select(requests, providers, EQUAL, seed=42).selection
    # random.Random(42).random() = 0.6394…, which falls in b's third [1/3, 2/3).
    assert selection["roll"] == pytest.approx(0.6394267984578837)
    assert selection["account"] == "b"
    assert selection["chosen"] == 1


def test_over_300_seeds_each_of_three_equal_accounts_is_chosen_25_to_42_percent() -> None:
    requests, providers = one_host_each(*THREE)
    counts = Counter(
        select(requests, providers, EQUAL, seed=s).selection["account"] for s in range(300)
    )
    assert set(counts) == set(THREE)
    for account in THREE:
        assert 0.25 <= counts[account] / 300 <= 0.42, counts


def test_without_a_seed_the_dice_uses_fresh_entropy() -> None:
    requests, providers = one_host_each(*THREE)
    rolls = {select(requests, providers, EQUAL, seed=None).selection["roll"] for _ in range(20)}
    assert len(rolls) == 20


def test_excluding_the_top_group_spills_over_to_the_next() -> None:
    requests, providers = one_host_each(*THREE)
    outcome = select(requests, providers, STRICT, accounts=TIERS, exclude=["a", "b"])
    assert outcome.selection["account"] == "c"
    assert group_members(outcome) == [["c"]]
    assert [r["priority_group"] for r in outcome.requests] == [None, None, 0]
    assert [r["probability"] for r in outcome.requests] == [0.0, 0.0, 1.0]
    assert "excluded: a, b" in (outcome.selection["trace"][0]["note"] or "")


def test_excluding_one_account_renormalises_its_group() -> None:
    requests, providers = one_host_each(*THREE)
    outcome = select(requests, providers, STRICT, accounts=TIERS, exclude=["a"])
    assert final(outcome) == pytest.approx({"b": 1.0, "c": 1.0})
    assert {
        select(requests, providers, STRICT, accounts=TIERS, exclude=["a"], seed=s).selection[
            "account"
        ]
        for s in range(30)
    } == {"b"}


def test_a_disabled_account_is_never_chosen() -> None:
    requests, providers = one_host_each(*THREE)
    accounts = {"a": {"enabled": False, "weight": 100}}
    chosen = {
        select(requests, providers, EQUAL, accounts=accounts, seed=s).selection["account"]
        for s in range(60)
    }
    assert chosen == {"b", "c"}
    assert select(requests, providers, EQUAL, accounts=accounts).requests[0]["probability"] == 0.0


def test_every_account_excluded_or_disabled_is_infeasible() -> None:
    requests, providers = one_host_each("a", "b")
    with pytest.raises(Infeasible, match=r"excluded or disabled \(excluded: a\) \(disabled: b\)"):
        select(requests, providers, EQUAL, accounts={"b": {"enabled": False}}, exclude=["a"])


def test_no_candidate_at_all_is_infeasible() -> None:
    with pytest.raises(Infeasible, match="no allocation candidate"):
        select([], {}, EQUAL)


def test_an_accounts_probability_is_shared_evenly_by_its_candidates() -> None:
    providers = {"a1": host("a1", "a"), "a2": host("a2", "a"), "b1": host("b1", "b")}
    requests = [candidate("a1", "a"), candidate("b1", "b"), candidate("a2", "a")]
    outcome = select(requests, providers, EQUAL)
    assert [r["probability"] for r in outcome.requests] == pytest.approx([0.25, 0.5, 0.25])
    assert [r["account"] for r in outcome.requests] == ["a", "b", "a"]


def test_the_candidate_within_the_chosen_account_is_drawn_uniformly() -> None:
    providers = {"a1": host("a1", "a"), "a2": host("a2", "a"), "b1": host("b1", "b")}
    requests = [candidate("a1", "a"), candidate("b1", "b"), candidate("a2", "a")]
    picks: Counter[int] = Counter()
    for seed in range(200):
        selection = select(
            requests, providers, EQUAL, accounts={"b": {"enabled": False}}, seed=seed
        ).selection
        assert requests[selection["chosen"]]["account"] == selection["account"] == "a"
        picks[selection["chosen"]] += 1
    assert set(picks) == {0, 2}
    assert 0.35 <= picks[0] / 200 <= 0.65
