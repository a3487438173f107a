"""Thousands of malformed and hostile jobs: every one is answered, none crashes an engine.

An engine answering ``rejected`` with code ``internal_error`` means an input reached
code that did not expect it — a bug even though the worker survives — so these tests
also refuse that code. Counts per kind, over the tests/fuzz/test_hostile_*.py files (one
or a few kinds to a file, so that the suite's processes share them), add up to more than
10,000 jobs.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.engine import Context, run
from apportion.limits import Limits
from tests.conftest import load_example
from tests.fuzz.hostile import CTX, FAST, answered, hostile_values

# A hostile value must be answered cleanly, not by casting garbage: numpy's
# "invalid value encountered in cast" once came from inventories of rejected jobs.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


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
