"""partition job and result."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from apportion.contracts.base import JobBase, WireModel, alias


def _number(value: Any) -> int | float:
    # JSON true/false would otherwise pass as 1/0; NaN/Infinity never reach an LP.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("number", "must be a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise PydanticCustomError("finite_number", "must be a finite number")
    return value


def _non_negative(value: Any) -> int | float:
    number = _number(value)
    if number < 0:
        raise PydanticCustomError("non_negative", "must not be negative")
    return number


def _dynamic(value: Any) -> int | float | str:
    if isinstance(value, str):
        return value
    try:
        return _number(value)
    except PydanticCustomError:
        raise PydanticCustomError("dynamic", 'must be a number or a "yaql=…" string') from None


# A whole number stays an int (yaql's `/` is integer division on ints, as upstream);
# plain validators keep error paths clean (`hardware.disks[0].size`, no union tags).
NonNegativeNumber = Annotated[
    int | float,
    PlainValidator(_non_negative, json_schema_input_type=float),
    WithJsonSchema({"type": "number", "minimum": 0}),
]

# A size or weight: a number, or a string "yaql=EXPR" evaluated against the hardware.
Dynamic = Annotated[
    int | float | str,
    PlainValidator(_dynamic, json_schema_input_type=float | str),
]


def _space_type(value: Any) -> Any:
    # The seed writes "partition", the Bareon code "partitions": accept both.
    return "partition" if value == "partitions" else value


def _contains_ref(value: Any) -> Any:
    # `contains: [{id: root}]` in the seed; a bare id string is accepted too.
    return {"id": value} if isinstance(value, str) else value


class ContainedRef(WireModel):
    id: str = Field(min_length=1, max_length=256)


class Space(WireModel):
    """One space of the dynamic schema: a volume group, a logical volume or a partition.

    Extra keys (``mount``, ``fs_type``, ``file_system``, …) are kept and passed
    through to the result, since the seed says the list is open.
    """

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1, max_length=256)
    type: Annotated[Literal["vg", "lv", "partition"], BeforeValidator(_space_type)]
    size: Dynamic | None = None
    min_size: Dynamic | None = None
    max_size: Dynamic | None = None
    weight: Dynamic = 1
    best_with_disks: str | list[str] | None = None
    contains: list[Annotated[ContainedRef, BeforeValidator(_contains_ref)]] | None = None
    mount: str | None = None
    fs_type: str | None = None


class Disk(WireModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1, max_length=256)
    size: NonNegativeNumber = Field(description="MiB")
    type: str | None = None
    path: str | None = None
    dev: str | None = None
    vendor: str | None = None


class Hardware(WireModel):
    """The node's hardware document; yaql expressions see all of it as ``$``."""

    model_config = ConfigDict(extra="allow")

    ram: NonNegativeNumber | None = Field(default=None, description="MiB")
    disks: list[Disk] = Field(min_length=1)


class PartitionJob(JobBase):
    # `schema` would shadow a BaseModel attribute; the wire name stays "schema".
    spaces: list[Space] = Field(
        validation_alias=alias("schema", "spaces"), serialization_alias="schema", min_length=1
    )
    hardware: Hardware


# ---- result -------------------------------------------------------------------------


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class SpaceOnDisk(_Out):
    space_id: str
    size: int = Field(description="MiB")


class DiskLayout(_Out):
    disk_id: str
    size: int = Field(description="MiB (the disk's whole size)")
    spaces: list[SpaceOnDisk] = Field(
        description="every lv and partition in schema order, then `unallocated`"
    )


class PhysicalVolume(_Out):
    disk_id: str
    size: int = Field(description="MiB: the sum of the vg's logical volumes on this disk")


class LogicalVolume(_Out):
    id: str
    size: int = Field(description="MiB: the lv's total over all disks")
    mount: str | None = None
    fs_type: str | None = None
    attributes: dict[str, Any] = Field(
        default_factory=dict,
        description="the space's other keys (yaql already evaluated), passed through",
    )


class VolumeGroupLayout(_Out):
    id: str
    physical_volumes: list[PhysicalVolume] = Field(
        description="one per disk holding any of the vg's lvs, in hardware order"
    )
    logical_volumes: list[LogicalVolume] = Field(description="in the vg's `contains` order")
    attributes: dict[str, Any] = Field(
        default_factory=dict,
        description="the vg's other keys (yaql already evaluated), passed through",
    )


class PartitionPlacement(_Out):
    """A partition space lands as one partition on every disk where it got MiB."""

    id: str
    disk_id: str
    size: int
    mount: str | None = None
    fs_type: str | None = None
    attributes: dict[str, Any] = Field(
        default_factory=dict,
        description="the space's other keys (yaql already evaluated), passed through",
    )


class PartitionResult(_Out):
    disks: list[DiskLayout]
    volume_groups: list[VolumeGroupLayout]
    partitions: list[PartitionPlacement]
