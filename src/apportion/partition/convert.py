"""The seed's "solution convertor": whole-MiB layout → static schema (docs/contract.md#partition).

* ``disks``: every disk in hardware order with every lv and partition in schema order,
  then ``unallocated``; the sizes on a disk add up to the disk's whole-MiB size.
* ``volume_groups``: per vg (schema order), one physical volume per disk that holds any
  of its lvs, sized as the sum of those lvs there; its logical volumes in ``contains``
  order with their totals.
* ``partitions``: per partition space (schema order), one placement per disk where it
  got MiB (a space spread over two disks is two partitions).
"""

from __future__ import annotations

from apportion.contracts.partition import PartitionResult
from apportion.partition.dynamic import Resolved
from apportion.partition.model import IntArray, Problem
from apportion.partition.schema import UNALLOCATED, ParsedSchema


def to_result(
    parsed: ParsedSchema, resolved: Resolved, problem: Problem, x: IntArray
) -> PartitionResult:
    # Plain dicts validated once: pydantic builds the nested models in one call, which
    # costs less than constructing each of them from Python.
    grid = x.reshape(problem.disks, problem.width).tolist()
    capacity = problem.capacity.tolist()
    names = [s.id for s in problem.spaces] + [UNALLOCATED]
    column = {s.id: j for j, s in enumerate(problem.spaces)}

    disks = [
        {
            "disk_id": disk_id,
            "size": capacity[d],
            "spaces": [{"space_id": n, "size": v} for n, v in zip(names, grid[d], strict=True)],
        }
        for d, disk_id in enumerate(problem.disk_ids)
    ]

    volume_groups = []
    for vg in parsed.volume_groups:
        lvs = [column[m] for m in vg.members]
        on_disk = [sum(grid[d][s] for s in lvs) for d in range(problem.disks)]
        logical = [
            {
                "id": problem.spaces[s].id,
                "size": sum(row[s] for row in grid),
                "mount": problem.spaces[s].mount,
                "fs_type": problem.spaces[s].fs_type,
                "attributes": dict(problem.spaces[s].attributes),
            }
            for s in lvs
        ]
        volume_groups.append(
            {
                "id": vg.space.id,
                "physical_volumes": [
                    {"disk_id": disk_id, "size": size}
                    for disk_id, size in zip(problem.disk_ids, on_disk, strict=True)
                    if size > 0
                ],
                "logical_volumes": logical,
                "attributes": dict(resolved.vg_attributes.get(vg.space.id, {})),
            }
        )

    partitions = [
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
    return PartitionResult.model_validate(
        {"disks": disks, "volume_groups": volume_groups, "partitions": partitions}
    )
