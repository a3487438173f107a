"""Builders for partition jobs and readers of their results (shared by this area's tests)."""

from __future__ import annotations

from typing import Any

from apportion.contracts.partition import PartitionJob, PartitionResult
from apportion.contracts.partition_checks import check_partition
from apportion.engine import Context
from apportion.limits import Limits
from apportion.partition import dynamic, model, schema, solve

Disk = tuple[str, float] | tuple[str, float, str]


def disks(*specs: Disk) -> list[dict[str, Any]]:
    out = []
    for spec in specs:
        disk: dict[str, Any] = {"id": spec[0], "size": spec[1]}
        if len(spec) > 2:
            disk["type"] = spec[2]
        out.append(disk)
    return out


def lv(space_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": space_id, "type": "lv", **fields}


def partition(space_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": space_id, "type": "partition", **fields}


def in_vg(*lvs: dict[str, Any], vg: str = "vg1") -> list[dict[str, Any]]:
    """The reference table's layout: a vg listed first containing every lv."""
    return [{"id": vg, "type": "vg", "contains": [{"id": s["id"]} for s in lvs]}, *lvs]


def payload(
    schema: list[dict[str, Any]],
    hardware_disks: list[dict[str, Any]] | None = None,
    **hardware: Any,
) -> dict[str, Any]:
    return {
        "schema": schema,
        "hardware": {"disks": hardware_disks or disks(("sda", 100)), **hardware},
    }


def checked(data: dict[str, Any], limits: Limits) -> PartitionJob:
    """The job as the engine is given it: validated by its model, then its kind's check."""
    return check_partition(PartitionJob.model_validate(data), limits)


def problem_of(data: dict[str, Any]) -> model.Problem:
    """A job's numbers as the engine builds them (parse, yaql values, the model)."""
    limits = Context().limits
    parsed = schema.parse(checked(data, limits))
    return model.build(parsed.disks, dynamic.resolve(parsed, limits).spaces)


def solve_payload(data: dict[str, Any], ctx: Context | None = None) -> PartitionResult:
    """The engine's answer, checked to be exactly the contract's shape and field order."""
    ctx = ctx or Context()
    answer = solve(checked(data, ctx.limits), ctx)
    result = PartitionResult.model_validate(answer)
    assert result.model_dump(mode="json") == answer
    assert _keys_in_order(result.model_dump(mode="json")) == _keys_in_order(answer)
    return result


def _keys_in_order(value: Any) -> Any:
    if isinstance(value, dict):
        return [(k, _keys_in_order(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_keys_in_order(v) for v in value]
    return None


def sizes(result: PartitionResult) -> dict[str, list[int]]:
    """disk id -> sizes of its spaces in result order (…, unallocated)."""
    return {d.disk_id: [s.size for s in d.spaces] for d in result.disks}


def totals(result: PartitionResult) -> dict[str, int]:
    out: dict[str, int] = {}
    for disk in result.disks:
        for space in disk.spaces:
            out[space.space_id] = out.get(space.space_id, 0) + space.size
    return out
