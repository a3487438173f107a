"""Which policy decides a launch_select job, and the result's record of it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from apportion.engine import Context, StoredPolicy, run
from apportion.errors import StoreUnavailable

NOW = datetime(2026, 11, 21, 22, 0, tzinfo=UTC)
FILE_POLICY = ({"module": "equal"}, {"module": "weights"})
GPU_V4 = StoredPolicy("gpu", 4, [{"module": "least_used"}, {"module": "priority"}])
DEFAULT_V2 = StoredPolicy("default", 2, [{"module": "equal"}, {"module": "cost"}])


def job(**extra: Any) -> dict[str, Any]:
    host = {"VCPU": {"total": 8}}
    return {
        "providers": [{"uuid": f"{a}-h", "account": a, "inventories": host} for a in "ab"],
        "request": "resources=VCPU:1",
        "seed": 1,
        **extra,
    }


class Store:
    """A policy store stand-in: gpu has its own policy, every other pool the default."""

    def __init__(self, *, default: StoredPolicy | None = DEFAULT_V2) -> None:
        self.default = default
        self.asked: list[str | None] = []

    def __call__(self, pool: str | None) -> StoredPolicy | None:
        self.asked.append(pool)
        return GPU_V4 if pool == "gpu" else self.default


def decided(payload: dict[str, Any], ctx: Context) -> tuple[dict[str, Any], list[str]]:
    env = run("launch_select", payload, ctx)
    assert env.status == "ok", env.error
    assert env.result is not None
    selection = env.result["selection"]
    modules = [] if selection is None else [s["module"] for s in selection["trace"]]
    return env.result["policy"], modules


def test_a_job_naming_its_pool_gets_that_pools_current_version() -> None:
    store = Store()
    record, modules = decided(job(pool="gpu"), Context(now=NOW, policy_lookup=store))

    assert record == {"source": "pool", "pool": "gpu", "version": 4}
    assert modules == ["least_used", "priority"]
    assert store.asked == ["gpu"]


def test_a_pool_without_its_own_policy_gets_the_stores_default() -> None:
    record, modules = decided(job(pool="batch"), Context(now=NOW, policy_lookup=Store()))

    assert record == {"source": "default", "pool": "default", "version": 2}
    assert modules == ["equal", "cost"]


def test_a_job_naming_no_pool_gets_the_stores_default() -> None:
    store = Store()
    record, _ = decided(job(), Context(now=NOW, policy_lookup=store))

    assert record == {"source": "default", "pool": "default", "version": 2}
    assert store.asked == [None]


def test_a_store_with_no_default_falls_back_to_the_default_policy_file() -> None:
    ctx = Context(now=NOW, policy_lookup=Store(default=None), default_policy=FILE_POLICY)
    record, modules = decided(job(pool="batch"), ctx)

    assert record == {"source": "file", "pool": None, "version": None}
    assert modules == ["equal", "weights"]


def test_without_a_store_the_default_policy_file_decides_whatever_the_pool() -> None:
    record, modules = decided(job(pool="gpu"), Context(now=NOW, default_policy=FILE_POLICY))

    assert record == {"source": "file", "pool": None, "version": None}
    assert modules == ["equal", "weights"]


def test_an_inline_policy_wins_over_the_pools_and_the_store_is_not_asked() -> None:
    store = Store()
    inline = [{"module": "equal"}, {"module": "priority", "mode": "probabilistic"}]
    record, modules = decided(job(pool="gpu", policy=inline), Context(policy_lookup=store))

    assert record == {"source": "inline", "pool": None, "version": None}
    assert modules == ["equal", "priority"]
    assert store.asked == []


def test_policy_null_is_candidates_only_even_where_inline_policies_are_off() -> None:
    ctx = Context(now=NOW, policy_lookup=Store(), allow_inline_policy=False)
    record, modules = decided(job(pool="gpu", policy=None), ctx)

    assert record == {"source": "none", "pool": None, "version": None}
    assert modules == []


def test_an_inline_policy_where_they_are_off_is_rejected_not_replaced() -> None:
    ctx = Context(now=NOW, policy_lookup=Store(), allow_inline_policy=False)
    env = run("launch_select", job(pool="gpu", policy=[{"module": "equal"}]), ctx)

    assert env.status == "rejected"
    assert env.error is not None
    assert env.error.code == "inline_policy_disabled"
    assert env.error.details[0].path == "policy"
    assert "APPORTION_ALLOW_INLINE_POLICY" in env.error.message


def test_a_store_that_cannot_answer_fails_the_job_for_a_retry_rather_than_answer_it() -> None:
    def unavailable(pool: str | None) -> StoredPolicy | None:
        raise StoreUnavailable("the policy store is unavailable: connection refused")

    ctx = Context(now=NOW, policy_lookup=unavailable, default_policy=FILE_POLICY)
    with pytest.raises(StoreUnavailable):
        run("launch_select", job(pool="gpu"), ctx)


@pytest.mark.parametrize("pool", ["", "has space", "a/b", "x" * 129, 7])
def test_a_pool_name_that_is_not_one_is_rejected_naming_the_field(pool: Any) -> None:
    env = run("launch_select", job(pool=pool), Context(now=NOW, policy_lookup=Store()))

    assert env.status == "rejected"
    assert env.error is not None
    assert env.error.details[0].path == "pool"
