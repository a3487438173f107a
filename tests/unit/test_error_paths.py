"""An invalid field is reported at the path the user wrote: no union branch in it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field, ValidationError

from apportion.contracts.base import alias, written_loc
from apportion.engine import run
from tests.conftest import load_example


class _Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class _Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class _Owner(BaseModel):
    tags: dict[str, int | list[int]] = Field(default_factory=dict)
    pets: list[Annotated[_Cat | _Dog, Field(discriminator="kind")]] = Field(default_factory=list)
    nick: str | list[str] | None = Field(default=None, validation_alias=alias("nick", "nickName"))


def _locs(data: Any) -> list[list[str | int]]:
    with pytest.raises(ValidationError) as info:
        _Owner.model_validate(data)
    schema = _Owner.__pydantic_core_schema__
    return [written_loc(schema, e["loc"]) for e in info.value.errors()]


def test_a_plain_unions_branches_are_left_out_of_the_path() -> None:
    assert _locs({"nick": 3}) == [["nick"], ["nick"]]
    assert _locs({"nickName": ["a", 3]}) == [["nickName"], ["nickName", 1]]


def test_a_union_inside_a_dict_value_is_left_out_of_the_path() -> None:
    assert _locs({"tags": {"a": "x"}}) == [["tags", "a"], ["tags", "a"]]


def test_a_tagged_unions_tag_is_left_out_of_the_path() -> None:
    assert _locs({"pets": [{"kind": "cat", "lives": 9}, {"kind": "dog", "good": "?"}]}) == [
        ["pets", 1, "good"]
    ]


def test_a_partition_spaces_best_with_disks_of_the_wrong_type_is_reported_at_its_key() -> None:
    job = load_example("partition.json")
    job["schema"][3]["best_with_disks"] = {"a": 1}

    env = run("partition", job)

    assert env.error is not None
    assert [(d.path, d.message) for d in env.error.details] == [
        ("schema[3].best_with_disks", "Input should be a valid string"),
        ("schema[3].best_with_disks", "Input should be a valid list"),
    ]


def test_a_best_with_disks_list_item_of_the_wrong_type_is_reported_at_its_index() -> None:
    job = load_example("partition.json")
    job["schema"][3]["best_with_disks"] = ["sda", 7]

    env = run("partition", job)

    assert env.error is not None
    assert [d.path for d in env.error.details] == [
        "schema[3].best_with_disks",
        "schema[3].best_with_disks[1]",
    ]
