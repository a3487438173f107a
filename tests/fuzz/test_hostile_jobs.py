"""Thousands of malformed and hostile jobs: every one is answered, none crashes an engine.

An engine answering ``rejected`` with code ``internal_error`` means an input reached
code that did not expect it — a bug even though the worker survives — so these tests
also refuse that code. Counts per kind add up to more than 10,000 jobs.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apportion.contracts import Envelope
from apportion.engine import Context, run
from apportion.limits import Limits
from tests.conftest import load_example
from tests.fuzz.hostile import hostile_values, mutated, nested

# A hostile value must be answered cleanly, not by casting garbage: numpy's
# "invalid value encountered in cast" once came from inventories of rejected jobs.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

FAST = settings(
    max_examples=2_600,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
# yaql expressions are evaluated in a forked, time-limited child; a hostile one costs up
# to the time limit, so the generated partition jobs avoid strings in sized fields and
# the bombs are listed explicitly below.
CTX = Context(limits=Limits(yaql_timeout_seconds=0.5))


def answered(env: Envelope) -> None:
    assert env.status in ("ok", "infeasible", "rejected")
    if env.status == "ok":
        assert env.result is not None
        assert env.error is None
    else:
        assert env.error is not None
        assert env.error.code != "internal_error", env.error.message
        assert "Traceback" not in env.error.message


@FAST
@given(mutated("auto_attach.json"))
def test_hostile_auto_attach_jobs_are_answered(job: Any) -> None:
    answered(run("auto_attach", job, CTX))


@settings(FAST, max_examples=1_300)
@given(mutated("guest_host_attach.json"))
def test_hostile_guest_host_attach_jobs_are_answered(job: Any) -> None:
    answered(run("guest_host_attach", job, CTX))


@settings(FAST, max_examples=600)
@given(mutated("heal_org.json"))
def test_hostile_heal_org_jobs_are_answered(job: Any) -> None:
    env = run("heal_org", job, CTX)

    answered(env)
    if env.status == "ok":
        assert env.result is not None
        for answer in env.result["consumers"]:
            assert answer["status"] in ("ok", "rejected")


@FAST
@given(st.one_of(mutated("launch_select.candidates.json"), mutated("launch_select.json")))
def test_hostile_launch_select_jobs_are_answered(job: Any) -> None:
    answered(run("launch_select", job, CTX))


@settings(FAST, max_examples=1_300)
@given(st.text(max_size=300))
def test_any_query_string_is_answered(request: str) -> None:
    job = {
        "providers": [{"uuid": "cn", "inventories": {"VCPU": {"total": 4}}}],
        "request": request,
        "policy": None,
    }
    answered(run("launch_select", job, CTX))


def _literal_partition() -> Any:
    """The partition example with its yaql values replaced by what they evaluate to."""
    job = load_example("partition.json")
    for space in job["schema"]:
        if space["id"] == "swap":
            space["size"] = 64
        if space["id"] == "ceph-journal":
            space["best_with_disks"] = ["sdc"]
    return job


@FAST
@given(mutated("partition.json", base=_literal_partition()))
def test_hostile_partition_jobs_are_answered(job: Any) -> None:
    answered(run("partition", job, CTX))


@settings(FAST, max_examples=60)
@given(mutated("partition.json", avoid=("size", "min_size", "max_size", "best_with_disks")))
def test_hostile_partition_jobs_with_yaql_values_are_answered(job: Any) -> None:
    answered(run("partition", job, CTX))


@settings(FAST, max_examples=600)
@given(mutated("launch_outcome.json"))
def test_hostile_launch_outcome_events_are_answered(job: Any) -> None:
    answered(run("launch_outcome", job, CTX))


@settings(FAST, max_examples=400)
@given(
    st.sampled_from(
        [
            "auto_attach",
            "guest_host_attach",
            "heal_org",
            "launch_select",
            "partition",
            "launch_outcome",
        ]
    ),
    hostile_values,
)
def test_a_job_that_is_not_an_object_is_rejected_at_the_root(kind: str, value: Any) -> None:
    env = run(kind, value, CTX)

    answered(env)
    if not isinstance(value, dict):
        assert env.status == "rejected"
        assert env.error is not None
        assert env.error.details[0].path == "$"


# ---- explicit hostile shapes --------------------------------------------------------


def provider(uuid: str, parent: str | None = None) -> dict[str, Any]:
    return {"uuid": uuid, "parent_provider_uuid": parent, "inventories": {"VCPU": {"total": 4}}}


@pytest.mark.parametrize(
    ("providers", "field"),
    [
        ([provider("a", "b"), provider("b", "a")], "parent_provider_uuid"),
        ([provider("a", "a")], "parent_provider_uuid"),
        ([provider("a", "ghost")], "parent_provider_uuid"),
        ([provider("a"), provider("a")], "uuid"),
    ],
    ids=["cycle", "own-parent", "unknown-parent", "duplicate-uuid"],
)
def test_broken_provider_trees_are_rejected_naming_the_provider(
    providers: list[dict[str, Any]], field: str
) -> None:
    env = run(
        "launch_select",
        {"providers": providers, "request": "resources=VCPU:1", "policy": None},
        CTX,
    )

    assert env.status == "rejected"
    assert env.error is not None
    assert any(d.path.startswith("providers[") for d in env.error.details)


@pytest.mark.parametrize(
    "expression",
    [
        "yaql=range(0, 100000000)",
        "yaql=range(0, 100000000).len()",
        "yaql=pow(10, pow(10, 8))",
        "yaql=let(x => range(0, 1000000)) -> $x.select($x).len()",
        "yaql=" + "(" * 5000 + "1" + ")" * 5000,
    ],
    ids=["range", "range-len", "pow", "nested-select", "deep-parentheses"],
)
def test_yaql_bombs_are_stopped_and_rejected_naming_the_field(expression: str) -> None:
    job = {
        "schema": [{"id": "p", "type": "partition", "size": expression}],
        "hardware": {"disks": [{"id": "sda", "size": 100}]},
    }

    env = run("partition", job, CTX)

    assert env.status == "rejected"
    assert env.error is not None
    assert env.error.details[0].path == "schema[0].size"


def test_a_job_nested_thousands_deep_is_rejected_not_a_recursion_crash() -> None:
    job = {
        "schema": [{"id": "p", "type": "partition", "size": 10, "extra": nested(5_000)}],
        "hardware": {"disks": [{"id": "sda", "size": 100}]},
    }

    env = run("partition", job, CTX)

    assert env.status == "rejected"
    assert env.error is not None
    assert env.error.code == "too_deep"
    assert env.error.details[0].path.startswith("schema[0].extra")
    assert "APPORTION_LIMITS__MAX_JSON_DEPTH" in env.error.message


def test_a_huge_string_anywhere_is_rejected_with_its_path() -> None:
    job = load_example("auto_attach.json")
    job["pools"][0]["attributes"] = {"note": "x" * 70_000}

    env = run("auto_attach", job, CTX)

    assert env.status == "rejected"
    assert env.error is not None
    assert env.error.details[0].path == "pools[0].attributes.note"


@pytest.mark.parametrize("kind", ["auto_attach", "launch_select", "partition"])
def test_oversized_jobs_are_rejected_by_the_limits(kind: str) -> None:
    small = Limits(max_pools=10, max_providers=10, max_spaces=10, max_disks=2)
    jobs: dict[str, Any] = {
        "auto_attach": {
            "consumer": {"uuid": "c"},
            "pools": [{"id": f"p{i}", "product_id": "x", "quantity": 1} for i in range(11)],
        },
        "launch_select": {
            "providers": [provider(f"rp{i}") for i in range(11)],
            "request": "resources=VCPU:1",
            "policy": None,
        },
        "partition": {
            "schema": [{"id": f"s{i}", "type": "partition", "size": 1} for i in range(11)],
            "hardware": {"disks": [{"id": "sda", "size": 100}]},
        },
    }

    env = run(kind, jobs[kind], Context(limits=small))

    assert env.status == "rejected"
    assert env.error is not None
    assert "limit" in env.error.message
