"""The result the engine writes as plain data is exactly what its published schema says.

The result is built as dicts and lists, not validated models, so these tests check it
against the same TypedDicts the JSON Schema is generated from: every key present,
in the declared order, with the declared types.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from apportion.contracts.launch import LaunchSelectResult
from apportion.engine import Context, run
from tests.unit.placement.helpers import SHARES, rp

RESULT: TypeAdapter[LaunchSelectResult] = TypeAdapter(LaunchSelectResult)


def farm() -> list[dict[str, Any]]:
    """::

    +---------------------------+
    | SS  DISK_GB: 100          |
    | MISC_SHARES_VIA_AGGREGATE |
    +-------------+-------------+
                  | agg
    +-------------+-------------+
    | CN1  (account "acme")     |
    +-------------+-------------+
                  |
    +-------------+-------------+
    | numa1  VCPU: 4 (1 used)   |
    |        MEMORY_MB: 2048    |
    |        HW_NUMA_ROOT       |
    +---------------------------+
    """
    return [
        rp("SS", traits=[SHARES], aggs=["agg"], DISK_GB=100),
        rp("CN1", aggs=["agg"], account="acme"),
        rp("numa1", "CN1", traits=["HW_NUMA_ROOT"], used={"VCPU": 1}, VCPU=4, MEMORY_MB=2048),
    ]


def keys_in_schema_order(value: Any, validated: Any) -> bool:
    """Every dict of ``value`` has the keys of its validated twin, in the same order."""
    if isinstance(value, dict):
        return list(value) == list(validated) and all(
            keys_in_schema_order(v, validated[k]) for k, v in value.items()
        )
    if isinstance(value, list):
        return all(keys_in_schema_order(v, w) for v, w in zip(value, validated, strict=True))
    return True


def test_a_candidates_only_result_is_its_schema_with_every_key_in_order() -> None:
    job = {"providers": farm(), "request": "resources=VCPU:1,DISK_GB:10", "policy": None}
    result = run("launch_select", job).result
    assert result is not None
    validated = RESULT.validate_python(result)
    assert validated == result
    assert keys_in_schema_order(result, validated)
    assert result["allocation_requests"] == [
        {
            "allocations": {
                "numa1": {"resources": {"VCPU": 1}},
                "SS": {"resources": {"DISK_GB": 10}},
            },
            "mappings": {"": ["SS", "numa1"]},
            "account": "acme",
            "priority_group": None,
            "probability": None,
            "cost_per_hour": None,
        }
    ]
    assert list(result) == [
        "allocation_requests",
        "provider_summaries",
        "selection",
        "extra",
        "attempts",
        "launched",
        "policy",
    ]
    assert result["policy"] == {"source": "none", "pool": None, "version": None}


def test_a_selected_result_is_its_schema_with_every_key_in_order() -> None:
    job = {
        "providers": farm(),
        "request": "resources=VCPU:1",
        "policy": [{"module": "equal"}, {"module": "cost", "mode": "probabilistic"}],
        "seed": 3,
    }
    result = run("launch_select", job, Context()).result
    assert result is not None
    validated = RESULT.validate_python(result)
    assert validated == result
    assert keys_in_schema_order(result, validated)
    assert result["selection"]["account"] == "acme"
    assert [step["module"] for step in result["selection"]["trace"]] == ["equal", "cost"]
    assert result["policy"] == {"source": "inline", "pool": None, "version": None}
