"""The expression module: an administrator's yaql factor per account (bounded)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from apportion.errors import Rejected
from apportion.limits import Limits
from tests.unit.selection.builders import candidate, final, host, one_host_each, select

NIGHT = datetime(2026, 11, 21, 22, 0, tzinfo=UTC)
NOON = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
PRIVATE_AT_NIGHT = {
    "module": "expression",
    "name": "private-at-night",
    "expression": (
        "switch($.cost_per_hour = 0 and ($.now.hour >= 20 or $.now.hour < 6) => 3, true => 1)"
    ),
}
ACCOUNTS = {"ec2": {"cost_per_hour": 0.4}}


def test_private_cloud_is_preferred_at_night_only() -> None:
    requests, providers = one_host_each("ec2", "vsphere")
    policy = [{"module": "equal"}, PRIVATE_AT_NIGHT]
    night = select(requests, providers, policy, accounts=ACCOUNTS, now=NIGHT)
    assert final(night) == pytest.approx({"ec2": 0.25, "vsphere": 0.75})
    assert (night.selection["trace"][1]["note"] or "").startswith("private-at-night: ")
    noon = select(requests, providers, policy, accounts=ACCOUNTS, now=NOON)
    assert final(noon) == pytest.approx({"ec2": 0.5, "vsphere": 0.5})


def test_the_expression_sees_failures_utilisation_and_the_account() -> None:
    providers = {"a-h": host("a-h", "a", vcpu=10, used=5), "b-h": host("b-h", "b", vcpu=10)}
    requests = [candidate("a-h", "a"), candidate("b-h", "b")]
    policy: list[dict[str, Any]] = [
        {"module": "equal", "weighted": False},
        {"module": "expression", "expression": "$.weight * (1 - $.utilisation) / (1 + $.failures)"},
    ]
    outcome = select(requests, providers, policy, accounts={"b": {"weight": 4}}, failures={"b": 1})
    # a: 1 * 0.5 / 1 = 0.5;  b: 4 * 1.0 / 2 = 2.0
    assert final(outcome) == pytest.approx({"a": 0.2, "b": 0.8})


def test_a_boolean_result_counts_as_one_or_zero() -> None:
    requests, providers = one_host_each("a", "b", "c")
    policy = [{"module": "equal"}, {"module": "expression", "expression": "$.id != 'b'"}]
    assert final(select(requests, providers, policy)) == pytest.approx(
        {"a": 0.5, "b": 0.0, "c": 0.5}
    )


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("-1", "returned -1 for account 'a'; a factor must be a number"),
        ("$.id", "returned 'a' for account 'a'"),
        ("1 +", "yaql syntax error"),
        ("1 / $.failures", "ZeroDivisionError"),
        ("range(0, 100000000).len()", "yaql"),
    ],
)
def test_expression_errors_are_rejected_at_the_expression_path(
    expression: str, message: str
) -> None:
    requests, providers = one_host_each("a", "b")
    policy = [
        {"module": "equal"},
        {"module": "weights"},
        {"module": "expression", "expression": expression},
    ]
    with pytest.raises(Rejected, match=message) as exc:
        select(requests, providers, policy, limits=Limits(yaql_timeout_seconds=0.5))
    assert [p.path for p in exc.value.problems] == ["policy[2].expression"]


def test_a_syntax_error_points_into_the_administrators_text() -> None:
    requests, providers = one_host_each("a")
    with pytest.raises(Rejected) as exc:
        select(
            requests,
            providers,
            [{"module": "equal"}, {"module": "expression", "expression": "1 +"}],
        )
    message = exc.value.problems[0].message
    assert "'1 +'" in message
    assert "$.select" not in message


def test_an_expression_longer_than_the_limit_is_rejected_before_evaluation() -> None:
    requests, providers = one_host_each("a")
    policy = [{"module": "equal"}, {"module": "expression", "expression": "1" + " + 1" * 20}]
    with pytest.raises(Rejected, match="81 characters exceeds the limit of 50") as exc:
        select(requests, providers, policy, limits=Limits(yaql_max_expression_length=50))
    assert [p.path for p in exc.value.problems] == ["policy[1].expression"]
    # At exactly the limit the wrapper's own characters do not count against it.
    exact = [{"module": "equal"}, {"module": "expression", "expression": "1" + " " * 48 + "1"}]
    with pytest.raises(Rejected, match="syntax"):
        select(requests, providers, exact, limits=Limits(yaql_max_expression_length=50))
