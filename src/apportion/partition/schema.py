"""Structure of a dynamic schema: ids, types, volume-group membership, disks, limits.

This is the seed's "dynamic schema parser" minus yaql (see :mod:`.dynamic`). It checks
everything that does not depend on evaluated values and reports every problem it
finds at once, each with its JSON path.

Decisions where the seed and the reference are silent:

* ``id``, ``type`` and ``contains`` are structural and taken literally (never yaql).
* A ``vg`` is a container, dropped from the LP as upstream does; its size is the sum of
  its lvs. Size keys (``size``, ``min_size``, ``max_size``, ``weight``,
  ``best_with_disks``) on a vg would be silently ignored upstream; here they are
  rejected so that a user never believes a constraint holds that does not.
* Every ``lv`` must sit in exactly one vg (the provisioning driver needs the vg to
  build its physical volumes); a vg contains only lvs, each once.
* ``unallocated`` is the name of the artificial space, so no space may use it.
* A disk offers its size in whole MiB (a fractional size is rounded down, after
  snapping float noise such as 99.9999999999 to 100).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from apportion import unknown_fields
from apportion.contracts.partition import Hardware, PartitionJob, Space
from apportion.errors import Problem, Rejected
from apportion.limits import Limits, env_name, over_limit

UNALLOCATED = "unallocated"

# Keys that shape the LP; a vg may carry none of them.
SIZE_KEYS = ("size", "min_size", "max_size", "weight", "best_with_disks")

# A space's keys other than the structural ones, in the contract's field order.
_VALUE_FIELDS = tuple(k for k in Space.model_fields if k not in ("id", "type", "contains"))

# Values closer than this to a whole MiB are taken as that MiB (float noise, not intent).
SNAP = 1e-6


# The records of a parsed job are NamedTuples: immutable like a frozen dataclass, but a
# frozen dataclass's __init__ sets every field through object.__setattr__, which costs
# more than the rest of building a record, on the path of every job. A field may not be
# named after a tuple method (index, count).


class RawSpace(NamedTuple):
    """A space as written: ``fields`` holds every key except id/type/contains, unevaluated."""

    position: int  # position in the job's `schema` list, for JSON paths
    id: str
    type: str  # "vg" | "lv" | "partition"
    fields: Mapping[str, Any]

    @property
    def path(self) -> str:
        return f"schema[{self.position}]"


class VolumeGroup(NamedTuple):
    space: RawSpace
    members: tuple[str, ...]  # lv ids in `contains` order


class DiskSpec(NamedTuple):
    id: str
    capacity: int  # whole MiB


class ParsedSchema(NamedTuple):
    spaces: tuple[RawSpace, ...]  # every space, schema order
    volume_groups: tuple[VolumeGroup, ...]
    vg_of: Mapping[str, str]  # lv id -> vg id
    disks: tuple[DiskSpec, ...]
    hardware_model: Hardware

    @property
    def hardware(self) -> dict[str, Any]:
        """The hardware document as the job sent it (yaql's ``$``).

        Dumped on demand: only a job with ``yaql=`` values needs it.
        """
        dumped: dict[str, Any] = self.hardware_model.model_dump(mode="json", exclude_unset=True)
        return dumped


def whole_floor(value: float) -> int:
    """Round down to whole MiB, after snapping values within :data:`SNAP` of an integer."""
    nearest = round(value)
    return int(nearest) if abs(value - nearest) <= SNAP else int(value // 1)


def whole_ceil(value: float) -> int:
    nearest = round(value)
    return int(nearest) if abs(value - nearest) <= SNAP else int(-(-value // 1))


def _check_limits(job: PartitionJob, limits: Limits) -> None:
    problems = []
    if len(job.spaces) > limits.max_spaces:
        problems.append(
            Problem(
                "schema",
                f"{len(job.spaces)} spaces exceed the limit of {limits.max_spaces} "
                f"(raise {env_name('max_spaces')})",
            )
        )
    disks = job.hardware.disks
    if len(disks) > limits.max_disks:
        problems.append(
            Problem(
                "hardware.disks",
                f"{len(disks)} disks exceed the limit of {limits.max_disks} "
                f"(raise {env_name('max_disks')})",
            )
        )
    if problems:  # max_spaces and max_disks share their code
        raise over_limit("max_spaces", problems)
    allocatable = sum([s.type != "vg" for s in job.spaces])
    variables = len(disks) * (allocatable + 1)
    if variables > limits.max_lp_variables:
        raise over_limit(
            "max_lp_variables",
            Problem(
                "schema",
                f"{len(disks)} disks × {allocatable + 1} spaces make {variables} LP variables, "
                f"over the limit of {limits.max_lp_variables} "
                f"(raise {env_name('max_lp_variables')})",
            ),
        )


def _disks(
    job: PartitionJob, limits: Limits, problems: list[Problem], oversized: list[Problem]
) -> tuple[DiskSpec, ...]:
    seen: dict[str, int] = {}
    out = []
    largest = limits.partition_max_size_mib
    for j, disk in enumerate(job.hardware.disks):
        disk_id, size = disk.id, disk.size  # read once, as in _spaces
        if disk_id in seen:
            problems.append(
                Problem(
                    f"hardware.disks[{j}].id",
                    f"duplicate disk id {disk_id!r} (first at hardware.disks[{seen[disk_id]}])",
                )
            )
            continue
        seen[disk_id] = j
        if size > largest:
            oversized.append(
                Problem(
                    f"hardware.disks[{j}].size",
                    f"{size:g} MiB exceeds the largest supported size "
                    f"of {largest} MiB "
                    f"(raise {env_name('partition_max_size_mib')})",
                )
            )
            problems.append(oversized[-1])
            continue
        out.append(DiskSpec(disk_id, whole_floor(size)))
    return tuple(out)


def _spaces(job: PartitionJob, problems: list[Problem]) -> tuple[RawSpace, ...]:
    seen: dict[str, int] = {}
    out = []
    for i, space in enumerate(job.spaces):
        # Read once: a pydantic model's attribute costs more than a local's.
        space_id, space_type = space.id, space.type
        if space_id == UNALLOCATED:
            problems.append(
                Problem(f"schema[{i}].id", f"{UNALLOCATED!r} is reserved for the space left free")
            )
        elif space_id in seen:
            problems.append(
                Problem(
                    f"schema[{i}].id",
                    f"duplicate space id {space_id!r} (first at schema[{seen[space_id]}])",
                )
            )
        else:
            seen[space_id] = i
        # A misspelt field (min_szie) is warned about, never passed through to the result.
        extra = unknown_fields.passed_through(Space, space.model_extra or {})
        given = space.model_fields_set
        if space_type == "vg":
            explicit = given | set(extra)
            for key in SIZE_KEYS:
                if key in explicit and getattr(space, key, None) is not None:
                    problems.append(
                        Problem(
                            f"schema[{i}].{key}",
                            "a vg takes no size: its size is the sum of "
                            "its logical volumes; set sizes on the lvs",
                        )
                    )
        elif space.contains is not None:
            problems.append(
                Problem(f"schema[{i}].contains", f"only a vg contains spaces, not a {space_type}")
            )
        # What model_dump(exclude={id, type, contains}, exclude_unset=True) gives (the
        # keys the job set, in field order, then the extra keys), without its cost.
        fields = {k: getattr(space, k) for k in _VALUE_FIELDS if k in given}
        fields.update(extra)
        out.append(RawSpace(i, space_id, space_type, fields))
    return tuple(out)


def _volume_groups(
    job: PartitionJob, spaces: tuple[RawSpace, ...], problems: list[Problem]
) -> tuple[tuple[VolumeGroup, ...], dict[str, str]]:
    by_id = {s.id: s for s in reversed(spaces)}  # first definition wins for lookups
    vg_of: dict[str, str] = {}
    # lv id -> (its vg's space, position in `contains`): the JSON path, should a later
    # vg list the lv again (joined only then)
    where: dict[str, tuple[RawSpace, int]] = {}
    groups = []
    for space, model in zip(spaces, job.spaces, strict=True):
        if space.type != "vg":
            continue
        members = []
        for j, ref in enumerate(model.contains or ()):
            ref_id = ref.id
            target = by_id.get(ref_id)
            if target is None:
                problems.append(Problem(_ref_path(space, j), f"unknown space {ref_id!r}"))
            elif target.type != "lv":
                message = f"{ref_id!r} is a {target.type}; a vg contains only lvs"
                problems.append(Problem(_ref_path(space, j), message))
            elif ref_id in vg_of:
                problems.append(
                    Problem(
                        _ref_path(space, j),
                        f"lv {ref_id!r} is already in vg {vg_of[ref_id]!r} "
                        f"({_ref_path(*where[ref_id])}); an lv belongs to one vg",
                    )
                )
            else:
                vg_of[ref_id] = space.id
                where[ref_id] = (space, j)
                members.append(ref_id)
        groups.append(VolumeGroup(space, tuple(members)))
    for space in spaces:
        if space.type == "lv" and space.id not in vg_of and by_id.get(space.id) is space:
            problems.append(
                Problem(
                    space.path,
                    f"lv {space.id!r} is not contained in any vg; list it in a vg's `contains`",
                )
            )
    return tuple(groups), vg_of


def _ref_path(vg: RawSpace, j: int) -> str:
    return f"{vg.path}.contains[{j}].id"


def parse(job: PartitionJob, limits: Limits) -> ParsedSchema:
    """Check the schema's structure and the hardware; raise :class:`Rejected` with every problem."""
    _check_limits(job, limits)  # before walking a huge job
    problems: list[Problem] = []
    oversized: list[Problem] = []
    disks = _disks(job, limits, problems, oversized)
    spaces = _spaces(job, problems)
    groups, vg_of = _volume_groups(job, spaces, problems)
    if problems and len(oversized) == len(problems):
        raise over_limit("partition_max_size_mib", problems)
    if problems:  # a job invalid besides its disks' sizes is invalid first
        raise _rejected(problems)
    return ParsedSchema(spaces, groups, vg_of, disks, job.hardware)


def _rejected(problems: list[Problem]) -> Rejected:
    return Rejected.of(problems)
