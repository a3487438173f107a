"""Hostile partition jobs are answered (tests/fuzz/hostile.py says what that means); yaql
bombs and a job nested thousands deep are rejected naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from apportion.engine import run
from tests.conftest import load_example
from tests.fuzz.hostile import CTX, FAST, answered, mutated, nested

# A hostile value must be answered cleanly, not by casting garbage: numpy's
# "invalid value encountered in cast" once came from inventories of rejected jobs.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


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
