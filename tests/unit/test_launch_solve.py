"""launch_select end to end in the engine: which policy, which failure counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from apportion.engine import Context, run
from apportion.engine_settings import load_default_policy

NOW = datetime(2026, 11, 21, 22, 0, tzinfo=UTC)


def three_accounts(**extra: Any) -> dict[str, Any]:
    host = {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 8192}}
    return {
        "providers": [
            {"uuid": f"{a}-h", "account": a, "inventories": host} for a in ("a", "b", "c")
        ],
        "request": "resources=VCPU:1",
        **extra,
    }


class Lookup:
    """A failure-history stand-in that records what it was asked."""

    def __init__(self, counts: Mapping[str, int]) -> None:
        self.counts = counts
        self.asked: list[tuple[list[str], float]] = []

    def __call__(self, accounts: Sequence[str], window: float) -> Mapping[str, int]:
        self.asked.append((list(accounts), window))
        return {a: self.counts.get(a, 0) for a in accounts}


def test_policy_null_gives_candidates_only() -> None:
    env = run("launch_select", three_accounts(policy=None))

    assert env.status == "ok"
    assert env.result is not None
    assert env.result["selection"] is None
    assert [r["account"] for r in env.result["allocation_requests"]] == ["a", "b", "c"]


def test_an_omitted_policy_gets_the_default_policy_from_config() -> None:
    ctx = Context(now=NOW, default_policy=load_default_policy())
    env = run("launch_select", three_accounts(seed=1), ctx)

    assert env.status == "ok"
    assert env.result is not None
    modules = [step["module"] for step in env.result["selection"]["trace"]]
    assert modules == ["equal", "weights", "failure_penalty", "priority"]


def test_an_omitted_policy_without_a_configured_default_is_candidates_only() -> None:
    env = run("launch_select", three_accounts(), Context(now=NOW, default_policy=None))

    assert env.result is not None
    assert env.result["selection"] is None


def test_without_failures_the_store_is_read_over_the_widest_penalty_window() -> None:
    lookup = Lookup({"b": 3})
    policy = [
        {"module": "equal"},
        {"module": "failure_penalty", "percent": 5, "window_hours": 6},
        {"module": "failure_penalty", "percent": 1, "window_hours": 24},
    ]
    env = run(
        "launch_select",
        three_accounts(policy=policy[:2], seed=3),
        Context(now=NOW, failure_counts=lookup),
    )

    assert lookup.asked == [(["a", "b", "c"], 6)]
    assert env.result is not None
    probs = env.result["selection"]["trace"][1]["probabilities"]
    assert probs["b"] == pytest.approx((1 / 3 - 0.15) / 0.85)
    assert env.result["extra"]["failures_source"] == "store"
    assert env.result["extra"]["failures"] == {"a": 0, "b": 3, "c": 0}

    run(
        "launch_select",
        three_accounts(policy=policy, seed=3),
        Context(now=NOW, failure_counts=lookup),
    )
    assert lookup.asked[-1][1] == 24


def test_failures_given_in_the_job_win_over_the_store() -> None:
    lookup = Lookup({"b": 3})
    policy = [{"module": "equal"}, {"module": "failure_penalty"}]
    env = run(
        "launch_select",
        three_accounts(policy=policy, failures={"a": 1}),
        Context(now=NOW, failure_counts=lookup),
    )

    assert lookup.asked == []
    assert env.result is not None
    probs = env.result["selection"]["trace"][1]["probabilities"]
    assert probs["a"] == pytest.approx((1 / 3 - 0.05) / 0.95)


def test_a_policy_without_failure_penalty_never_reads_the_store() -> None:
    lookup = Lookup({"b": 3})
    run(
        "launch_select",
        three_accounts(policy=[{"module": "equal"}]),
        Context(now=NOW, failure_counts=lookup),
    )

    assert lookup.asked == []


def test_policy_errors_are_reported_where_the_user_wrote_them() -> None:
    policy = [
        {"module": "equal"},
        {"module": "failure_penalty", "percent": 500},
        {"module": "tarot"},
    ]
    env = run("launch_select", three_accounts(policy=policy))

    assert env.status == "rejected"
    assert env.error is not None
    paths = {d.path for d in env.error.details}
    assert {"policy[1].percent", "policy[2].module"} <= paths


def test_the_trace_splits_probabilities_by_priority_group() -> None:
    job = three_accounts(
        policy=[{"module": "equal"}, {"module": "priority", "mode": "strict"}],
        accounts={"a": {"priority": 5}, "b": {"priority": 5}, "c": {"priority": 1}},
        seed=0,
    )
    env = run("launch_select", job)

    assert env.result is not None
    last = env.result["selection"]["trace"][-1]
    assert last["groups"] == [{"a": 0.5, "b": 0.5}, {"c": 1.0}]
    assert [g["priority"] for g in env.result["selection"]["groups"]] == [0, 1]
