"""The seed's "solution convertor": whole-MiB layout → static schema.

* ``disks``: every disk in hardware order with every lv and partition in schema order,
  then ``unallocated``; the sizes on a disk add up to the disk's whole-MiB size.
* ``volume_groups``: per vg (schema order), one physical volume per disk that holds any
  of its lvs, sized as the sum of those lvs there; its logical volumes in ``contains``
  order with their totals.
* ``partitions``: per partition space (schema order), one placement per disk where it
  got MiB (a space spread over two disks is two partitions).
"""

from __future__ import annotations

from typing import Any

from apportion.contracts.partition_checks import UNALLOCATED
from apportion.partition.dynamic import Resolved
from apportion.partition.model import IntArray, Problem
from apportion.partition.schema import ParsedSchema

# The result is plain JSON data shaped exactly as the contract's ``PartitionResult``
# (its JSON Schema; keys in its field order, every field present): building the
# models and dumping them again cost more than the LP on a large schema. Tests
# validate this data against the model.
Result = dict[str, Any]


def to_result(parsed: ParsedSchema, resolved: Resolved, problem: Problem, x: IntArray) -> Result:
    grid = x.reshape(problem.disks, problem.width).tolist()
    return {
        "disks": _disks(problem, grid),
        "volume_groups": _volume_groups(parsed, resolved, problem, grid),
        "partitions": _partitions(problem, grid),
    }


def _disks(problem: Problem, grid: list[list[int]]) -> list[dict[str, Any]]:
    capacity = problem.capacity.tolist()
    names = [s.id for s in problem.spaces] + [UNALLOCATED]
    return [
        {
            "disk_id": disk_id,
            "size": capacity[d],
            "spaces": [{"space_id": n, "size": v} for n, v in zip(names, grid[d], strict=True)],
        }
        for d, disk_id in enumerate(problem.disk_ids)
    ]


def _volume_groups(
    parsed: ParsedSchema, resolved: Resolved, problem: Problem, grid: list[list[int]]
) -> list[dict[str, Any]]:
    if not parsed.volume_groups:
        return []
    spaces = problem.spaces
    column = {s.id: j for j, s in enumerate(spaces)}
    totals = list(map(sum, zip(*grid, strict=True)))  # every space's MiB over all disks
    out = []
    for vg in parsed.volume_groups:
        lvs = [column[m] for m in vg.members]
        logical = [
            {
                "id": spaces[s].id,
                "size": totals[s],
                "mount": spaces[s].mount,
                "fs_type": spaces[s].fs_type,
                "attributes": dict(spaces[s].attributes),
            }
            for s in lvs
        ]
        physical = []
        for disk_id, row in zip(problem.disk_ids, grid, strict=True):
            size = sum([row[s] for s in lvs])
            if size > 0:
                physical.append({"disk_id": disk_id, "size": size})
        out.append(
            {
                "id": vg.space.id,
                "physical_volumes": physical,
                "logical_volumes": logical,
                "attributes": dict(resolved.vg_attributes.get(vg.space.id, {})),
            }
        )
    return out


def _partitions(problem: Problem, grid: list[list[int]]) -> list[dict[str, Any]]:
    return [
        {
            "id": space.id,
            "disk_id": disk_id,
            "size": grid[d][s],
            "mount": space.mount,
            "fs_type": space.fs_type,
            "attributes": dict(space.attributes),
        }
        for s, space in enumerate(problem.spaces)
        if space.type == "partition"
        for d, disk_id in enumerate(problem.disk_ids)
        if grid[d][s] > 0
    ]
