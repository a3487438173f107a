"""Base distributions (equal, least_used) and the weights module."""

from __future__ import annotations

import pytest

from tests.unit.selection.builders import after, candidate, final, host, one_host_each, select

THREE = ("a", "b", "c")


def test_equal_over_three_accounts_gives_thirds() -> None:
    requests, providers = one_host_each(*THREE)
    outcome = select(requests, providers, [{"module": "equal"}])
    assert final(outcome) == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    assert outcome.selection["trace"][0]["module"] == "equal"


def test_weights_two_one_one_give_a_half_and_two_quarters() -> None:
    requests, providers = one_host_each(*THREE)
    outcome = select(
        requests,
        providers,
        [{"module": "equal"}, {"module": "weights"}],
        accounts={"a": {"weight": 2}},
    )
    assert after(outcome, 0) == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    assert final(outcome) == pytest.approx({"a": 0.5, "b": 0.25, "c": 0.25})


def test_equal_alone_respects_account_weight_when_no_weights_module_follows() -> None:
    requests, providers = one_host_each(*THREE)
    outcome = select(requests, providers, [{"module": "equal"}], accounts={"a": {"weight": 2}})
    assert final(outcome) == pytest.approx({"a": 0.5, "b": 0.25, "c": 0.25})


def test_weight_is_never_counted_twice_unless_asked() -> None:
    requests, providers = one_host_each(*THREE)
    accounts = {"a": {"weight": 2}}
    unweighted = select(
        requests, providers, [{"module": "equal", "weighted": False}], accounts=accounts
    )
    assert final(unweighted) == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    twice = select(
        requests,
        providers,
        [{"module": "equal", "weighted": True}, {"module": "weights"}],
        accounts=accounts,
    )
    assert final(twice) == pytest.approx({"a": 4 / 6, "b": 1 / 6, "c": 1 / 6})


def test_a_weights_map_overrides_the_named_accounts_only() -> None:
    requests, providers = one_host_each(*THREE)
    outcome = select(
        requests,
        providers,
        [{"module": "equal"}, {"module": "weights", "weights": {"b": 3}}],
        accounts={"a": {"weight": 2}},
    )
    assert final(outcome) == pytest.approx({"a": 2 / 6, "b": 3 / 6, "c": 1 / 6})


def test_zero_weights_everywhere_fall_back_to_equal_and_say_so() -> None:
    requests, providers = one_host_each("a", "b")
    outcome = select(
        requests,
        providers,
        [{"module": "equal"}, {"module": "weights"}],
        accounts={"a": {"weight": 0}, "b": {"weight": 0}},
    )
    assert final(outcome) == pytest.approx({"a": 0.5, "b": 0.5})
    assert "every account at 0, equal within the group" in (
        outcome.selection["trace"][1]["note"] or ""
    )


def test_least_used_is_proportional_to_free_share() -> None:
    providers = {
        "a-h": host("a-h", "a", vcpu=32, used=24),  # 25 % free
        "b-h": host("b-h", "b", vcpu=32, used=8),  # 75 % free
        "c-h": host("c-h", "c", vcpu=32, used=0),  # all free
    }
    requests = [candidate(f"{a}-h", a) for a in THREE]
    outcome = select(requests, providers, [{"module": "least_used"}])
    assert final(outcome) == pytest.approx({"a": 0.125, "b": 0.375, "c": 0.5})


def test_least_used_counts_every_provider_of_the_account_and_applies_weight() -> None:
    providers = {
        # account a: a full host (not a candidate) and an empty one → 50 % free
        "a-full": host("a-full", "a", vcpu=16, used=16),
        "a-h": host("a-h", "a", vcpu=16),
        "b-h": host("b-h", "b", vcpu=32, used=16),  # 50 % free
    }
    requests = [candidate("a-h", "a"), candidate("b-h", "b")]
    outcome = select(requests, providers, [{"module": "least_used"}], accounts={"a": {"weight": 3}})
    assert final(outcome) == pytest.approx({"a": 0.75, "b": 0.25})


def test_least_used_with_every_account_full_falls_back_to_equal() -> None:
    providers = {f"{a}-h": host(f"{a}-h", a, vcpu=8, used=8) for a in ("a", "b")}
    requests = [candidate(f"{a}-h", a) for a in ("a", "b")]
    outcome = select(requests, providers, [{"module": "least_used"}])
    assert final(outcome) == pytest.approx({"a": 0.5, "b": 0.5})
    assert "equal within the group" in (outcome.selection["trace"][0]["note"] or "")
