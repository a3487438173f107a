"""Bad policies and inputs are Rejected with the JSON path of every problem."""

from __future__ import annotations

from typing import Any

import pytest

from apportion.contracts.policy import EqualModule, WeightsModule
from apportion.errors import Rejected
from apportion.limits import Limits
from apportion.selection import check_policy, failure_window_hours, parse_policy
from tests.unit.selection.builders import one_host_each, select


def _paths(exc: pytest.ExceptionInfo[Rejected]) -> list[str]:
    return [p.path for p in exc.value.problems]


def test_a_policy_must_start_with_equal_or_least_used() -> None:
    requests, providers = one_host_each("a", "b")
    with pytest.raises(Rejected, match="starts with a base distribution") as exc:
        select(requests, providers, [{"module": "weights"}, {"module": "equal"}])
    assert _paths(exc) == ["policy[0].module", "policy[1].module"]


def test_a_base_module_later_in_the_stack_is_rejected() -> None:
    with pytest.raises(Rejected) as exc:
        check_policy(
            [
                EqualModule(module="equal"),
                WeightsModule(module="weights"),
                EqualModule(module="equal"),
            ],
            Limits(),
        )
    assert _paths(exc) == ["policy[2].module"]


def test_an_empty_policy_is_rejected_at_policy() -> None:
    with pytest.raises(Rejected, match="send null for candidates only") as exc:
        check_policy([], Limits())
    assert _paths(exc) == ["policy"]


def test_more_modules_than_the_limit_are_rejected() -> None:
    policy = [EqualModule(module="equal")] + [WeightsModule(module="weights")] * 4
    with pytest.raises(Rejected, match="5 modules exceed the limit of 4") as exc:
        check_policy(policy, Limits(max_policy_modules=4))
    assert _paths(exc) == ["policy"]


@pytest.mark.parametrize(
    ("policy", "paths"),
    [
        ([{"module": "equal"}, {"module": "roulette"}], ["policy[1].module"]),
        ([{"weights": {}}], ["policy[0].module"]),
        (
            [{"module": "equal"}, {"module": "failure_penalty", "percent": -5}],
            ["policy[1].percent"],
        ),
        (
            [{"module": "equal"}, {"module": "failure_penalty", "window_hours": 0}],
            ["policy[1].window_hours"],
        ),
        (
            [{"module": "equal"}, {"module": "failure_penalty", "hard_limit": 0}],
            ["policy[1].hard_limit"],
        ),
        ([{"module": "equal"}, {"module": "priority", "mode": "loose"}], ["policy[1].mode"]),
        ([{"module": "equal"}, {"module": "priority", "strength": -1}], ["policy[1].strength"]),
        ([{"module": "equal"}, {"module": "cost", "amount": -0.1}], ["policy[1].amount"]),
        (
            [{"module": "equal"}, {"module": "weights", "weights": {"a": -2}}],
            ["policy[1].weights.a"],
        ),
        (
            [{"module": "equal"}, {"module": "expression", "expression": ""}],
            ["policy[1].expression"],
        ),
    ],
)
def test_bad_module_parameters_are_rejected_with_their_path(
    policy: list[dict[str, Any]], paths: list[str]
) -> None:
    with pytest.raises(Rejected) as exc:
        parse_policy(policy)
    assert _paths(exc) == paths


def test_a_negative_failure_count_is_rejected() -> None:
    requests, providers = one_host_each("a", "b")
    with pytest.raises(Rejected, match="failure count must be") as exc:
        select(requests, providers, [{"module": "equal"}], failures={"b": -1})
    assert _paths(exc) == ["failures.b"]


def test_too_many_accounts_are_rejected_with_the_limit() -> None:
    requests, providers = one_host_each("a", "b", "c")
    limits = Limits(max_accounts=2)
    with pytest.raises(Rejected, match="3 entries exceed the limit of 2") as exc:
        select(requests, providers, [{"module": "equal"}], exclude=["x", "y", "z"], limits=limits)
    assert _paths(exc) == ["exclude_accounts"]
    with pytest.raises(Rejected, match="span 3 accounts") as exc:
        select(requests, providers, [{"module": "equal"}], limits=limits)
    assert _paths(exc) == ["providers"]


def test_the_failure_window_is_the_widest_penalty_window() -> None:
    assert failure_window_hours(parse_policy([{"module": "equal"}])) is None
    policy = parse_policy(
        [
            {"module": "equal"},
            {"module": "failure_penalty"},
            {"module": "failure_penalty", "window_hours": 12},
        ]
    )
    assert failure_window_hours(policy) == 12
