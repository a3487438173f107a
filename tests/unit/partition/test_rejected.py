"""Malformed schemas are `rejected` with the JSON path of every problem."""

from __future__ import annotations

from typing import Any

import pytest

from apportion.engine import Context, run
from apportion.errors import Rejected
from apportion.limits import Limits

from .support import disks, in_vg, lv, partition, payload, solve_payload


def _paths(data: dict[str, Any], ctx: Context | None = None) -> list[str]:
    envelope = run("partition", data, ctx)
    assert envelope.status == "rejected", envelope
    assert envelope.error is not None
    return [d.path for d in envelope.error.details]


def _rejected(data: dict[str, Any], ctx: Context | None = None) -> Rejected:
    with pytest.raises(Rejected) as caught:
        solve_payload(data, ctx)
    return caught.value


CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("missing id", payload([{"type": "partition"}]), ["schema[0].id"]),
    ("missing type", payload([{"id": "p"}]), ["schema[0].type"]),
    ("unknown type", payload([{"id": "p", "type": "raid"}]), ["schema[0].type"]),
    ("negative min_size", payload(in_vg(lv("a", min_size=-1))), ["schema[1].min_size"]),
    ("negative size", payload([partition("p", size=-5)]), ["schema[0].size"]),
    ("boolean size", payload([partition("p", size=True)]), ["schema[0].size"]),
    ("size as a plain string", payload([partition("p", size="100")]), ["schema[0].size"]),
    ("min above max", payload(in_vg(lv("a", min_size=30, max_size=20))), ["schema[1].min_size"]),
    ("size below its min", payload([partition("p", size=5, min_size=10)]), ["schema[0].size"]),
    ("negative weight", payload([partition("p", weight=-1)]), ["schema[0].weight"]),
    ("duplicate ids", payload([partition("p"), partition("p")]), ["schema[1].id"]),
    ("reserved id", payload([partition("unallocated")]), ["schema[0].id"]),
    ("lv outside any vg", payload([lv("a")]), ["schema[0]"]),
    (
        "vg with an unknown id",
        payload([{"id": "vg1", "type": "vg", "contains": [{"id": "a"}, {"id": "ghost"}]}, lv("a")]),
        ["schema[0].contains[1].id"],
    ),
    (
        "vg containing a partition",
        payload([{"id": "vg1", "type": "vg", "contains": [{"id": "p"}]}, partition("p")]),
        ["schema[0].contains[0].id"],
    ),
    (
        "lv in two vgs",
        payload([*in_vg(lv("a")), {"id": "vg2", "type": "vg", "contains": [{"id": "a"}]}]),
        ["schema[2].contains[0].id"],
    ),
    (
        "vg with a size",
        payload([{"id": "vg1", "type": "vg", "size": 10, "contains": []}]),
        ["schema[0].size"],
    ),
    (
        "partition with contains",
        payload([{"id": "p", "type": "partition", "contains": [{"id": "q"}]}]),
        ["schema[0].contains"],
    ),
    (
        "duplicate disk ids",
        payload([partition("p")], disks(("sda", 10), ("sda", 20))),
        ["hardware.disks[1].id"],
    ),
    (
        "negative disk size",
        payload([partition("p")], disks(("sda", -10))),
        ["hardware.disks[0].size"],
    ),
    ("no disks", {"schema": [partition("p")], "hardware": {"disks": []}}, ["hardware.disks"]),
]


@pytest.mark.parametrize(("data", "paths"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_schema_is_rejected_at_its_path(data: dict[str, Any], paths: list[str]) -> None:
    assert _paths(data) == paths


def test_every_problem_of_a_job_is_reported_at_once() -> None:
    data = payload([partition("p", min_size=-1), partition("p"), lv("a")])
    assert _paths(data) == ["schema[1].id", "schema[2]"]  # structure first, values next


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("size", "yaql='big'", "schema[0].size"),
        ("max_size", "yaql=$.disks", "schema[0].max_size"),
        ("weight", "yaql=null", "schema[0].weight"),
        ("best_with_disks", "yaql=$.ram", "schema[0].best_with_disks"),
        ("best_with_disks", "yaql=list(1, 'sda')", "schema[0].best_with_disks[0]"),
        ("best_with_disks", "yaql=list('sdz')", "schema[0].best_with_disks[0]"),
        ("best_with_disks", "ssd", "schema[0].best_with_disks"),
        ("mount", "yaql=42", "schema[0].mount"),
        ("size", "yaql=$.ram * 1.0 / 0", "schema[0].size"),
    ],
)
def test_a_yaql_value_of_the_wrong_type_is_rejected_at_its_field(
    field: str, value: str, path: str
) -> None:
    error = _rejected(payload([partition("p", **{field: value})], ram=1024))
    assert [p.path for p in error.problems] == [path]


def test_best_with_disks_names_an_unknown_disk_id() -> None:
    error = _rejected(payload([partition("p", best_with_disks=["sda", "sdq"])]))
    assert [(p.path, p.message) for p in error.problems] == [
        ("schema[0].best_with_disks[1]", "unknown disk 'sdq'")
    ]


def test_more_disks_than_the_limit_are_rejected() -> None:
    ctx = Context(limits=Limits(max_disks=2))
    data = payload([partition("p")], disks(("a", 1), ("b", 1), ("c", 1)))
    assert _paths(data, ctx) == ["hardware.disks"]


def test_more_spaces_than_the_limit_are_rejected() -> None:
    ctx = Context(limits=Limits(max_spaces=2))
    data = payload([partition("p"), partition("q"), partition("r")])
    assert _paths(data, ctx) == ["schema"]


def test_too_many_lp_variables_are_rejected() -> None:
    ctx = Context(limits=Limits(max_lp_variables=5))
    data = payload([partition("p"), partition("q")], disks(("a", 1), ("b", 1)))
    assert _paths(data, ctx) == ["schema"]


def test_a_size_beyond_the_largest_supported_size_is_rejected() -> None:
    ctx = Context(limits=Limits(partition_max_size_mib=1000))
    assert _paths(payload([partition("p", min_size=1001)]), ctx) == ["schema[0].min_size"]
    assert _paths(payload([partition("p")], disks(("sda", 1001))), ctx) == [
        "hardware.disks[0].size"
    ]


def test_an_lv_listed_by_two_vgs_names_where_the_first_listed_it() -> None:
    error = _rejected(
        payload([*in_vg(lv("a")), {"id": "vg2", "type": "vg", "contains": [{"id": "a"}]}])
    )
    assert [(p.path, p.message) for p in error.problems] == [
        (
            "schema[2].contains[0].id",
            "lv 'a' is already in vg 'vg1' (schema[0].contains[0].id); an lv belongs to one vg",
        )
    ]


def test_the_values_of_a_space_are_reported_in_field_order() -> None:
    bad = partition(
        "p", size=-1, weight=-1, best_with_disks=["sdq"], mount="yaql=42", fs_type="yaql=7"
    )
    assert [p.path for p in _rejected(payload([bad], ram=1024)).problems] == [
        "schema[0].size",
        "schema[0].weight",
        "schema[0].best_with_disks[0]",
        "schema[0].mount",
        "schema[0].fs_type",
    ]


RESERVED_YAQL = "yaql=dict('__type__' => 'datetime', '__value__' => '2020-01-01T00:00:00')"


def test_an_expression_giving_a_reserved_object_is_a_bad_expression_naming_its_field() -> None:
    data = payload(in_vg(lv("root", min_size=10, meta=RESERVED_YAQL)), disks(("sda", 100)))

    exc = _rejected(data)

    assert exc.code == "bad_expression"
    assert [p.path for p in exc.problems] == ["schema[1].meta"]
    assert exc.problems[0].message == (
        "the result holds an object made of exactly __type__ and __value__, which the "
        "message codec reserves (a client would decode it as a Python object)"
    )


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("int('9' * 5000)", "yaql evaluation failed: an integer of more than 4300 digits"),
        ("pow(10, 100000)", "the result holds an integer of more than 4300 digits"),
    ],
)
def test_an_integer_past_4300_digits_from_yaql_is_named_without_pythons_advice(
    expression: str, message: str
) -> None:
    data = payload(in_vg(lv("root", min_size=f"yaql={expression}")), disks(("sda", 100)))

    exc = _rejected(data)

    assert exc.code == "bad_expression"
    assert [p.path for p in exc.problems] == ["schema[1].min_size"]
    assert exc.problems[0].message == (
        f"{message}, far outside the 64-bit range the engines compute in"
    )
