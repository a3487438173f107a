"""Structure of a dynamic schema: the job's spaces, volume groups and disks as records.

This is the seed's "dynamic schema parser" minus yaql (see :mod:`.dynamic`), reading a
job that its kind's check (:mod:`apportion.contracts.partition_checks`) already found
valid: ids unique, volume groups well formed, disks within the limits. It checks nothing
again.

Decisions where the seed and the reference are silent:

* ``id``, ``type`` and ``contains`` are structural and taken literally (never yaql).
* A ``vg`` is a container, dropped from the LP as upstream does; its size is the sum of
  its lvs (the check rejects size keys on a vg, which upstream would silently ignore).
* Every ``lv`` sits in exactly one vg (the provisioning driver needs the vg to build
  its physical volumes).
* A disk offers its size in whole MiB (a fractional size is rounded down, after
  snapping float noise such as 99.9999999999 to 100).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from apportion import unknown_fields
from apportion.contracts.partition import Hardware, PartitionJob, Space

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


def _disks(job: PartitionJob) -> tuple[DiskSpec, ...]:
    return tuple([DiskSpec(disk.id, whole_floor(disk.size)) for disk in job.hardware.disks])


def _spaces(job: PartitionJob) -> tuple[RawSpace, ...]:
    out = []
    for i, space in enumerate(job.spaces):
        # A misspelt field (min_szie) is warned about, never passed through to the result.
        extra = unknown_fields.passed_through(Space, space.model_extra or {})
        given = space.model_fields_set
        # What model_dump(exclude={id, type, contains}, exclude_unset=True) gives (the
        # keys the job set, in field order, then the extra keys), without its cost.
        fields = {k: getattr(space, k) for k in _VALUE_FIELDS if k in given}
        fields.update(extra)
        out.append(RawSpace(i, space.id, space.type, fields))
    return tuple(out)


def _volume_groups(
    job: PartitionJob, spaces: tuple[RawSpace, ...]
) -> tuple[tuple[VolumeGroup, ...], dict[str, str]]:
    vg_of: dict[str, str] = {}
    groups = []
    for space, model in zip(spaces, job.spaces, strict=True):
        if space.type != "vg":
            continue
        members = tuple([ref.id for ref in model.contains or ()])
        vg_of.update(dict.fromkeys(members, space.id))
        groups.append(VolumeGroup(space, members))
    return tuple(groups), vg_of


def parse(job: PartitionJob) -> ParsedSchema:
    """The job's spaces, volume groups and disks as records, from a job that its kind's
    check (:mod:`apportion.contracts.partition_checks`) found valid."""
    spaces = _spaces(job)
    groups, vg_of = _volume_groups(job, spaces)
    return ParsedSchema(spaces, groups, vg_of, _disks(job), job.hardware)
