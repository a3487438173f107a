"""The static schema: disks with every space, volume groups with PVs, partitions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from apportion.engine import run

from .support import disks, in_vg, lv, partition, payload, solve_payload

# The example job (examples/) and the reference allocator's answer (tests/data/reference/).
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
REFERENCE = Path(__file__).resolve().parents[2] / "data" / "reference"


def _load(name: str) -> Any:
    return json.loads((EXAMPLES / name).read_text())


def test_shared_example_gives_exactly_the_reference_disks() -> None:
    envelope = run("partition", _load("partition.json"))
    assert envelope.status == "ok"
    assert envelope.job_id == "example-partition-1"
    assert envelope.result is not None
    assert (
        envelope.result["disks"] == json.loads((REFERENCE / "partition.json").read_text())["disks"]
    )


def test_shared_example_volume_group_has_a_physical_volume_per_disk_it_uses() -> None:
    envelope = run("partition", _load("partition.json"))
    assert envelope.result is not None
    assert envelope.result["volume_groups"] == [
        {
            "id": "os",
            "physical_volumes": [{"disk_id": "sda", "size": 100}, {"disk_id": "sdb", "size": 200}],
            "logical_volumes": [
                {"id": "root", "size": 236, "mount": "/", "fs_type": "ext4", "attributes": {}},
                {"id": "swap", "size": 64, "mount": None, "fs_type": "swap", "attributes": {}},
            ],
            "attributes": {},
        }
    ]
    assert envelope.result["partitions"] == [
        {
            "id": "ceph-journal",
            "disk_id": "sdc",
            "size": 10,
            "mount": None,
            "fs_type": None,
            "attributes": {},
        }
    ]


def test_every_disk_lists_lvs_and_partitions_in_schema_order_then_unallocated() -> None:
    schema = [
        partition("boot", size=10, mount="/boot"),
        *in_vg(lv("root", min_size=20), lv("swap", size=5), vg="os"),
        partition("data", max_size=30),
    ]
    result = solve_payload(payload(schema, disks(("sda", 50), ("sdb", 60))))
    for disk in result.disks:
        assert [s.space_id for s in disk.spaces] == ["boot", "root", "swap", "data", "unallocated"]
        assert sum(s.size for s in disk.spaces) == disk.size


def test_a_partition_spread_over_two_disks_is_two_placements() -> None:
    schema = [partition("data", min_size=150, fs_type="xfs", mount="/srv")]
    result = solve_payload(payload(schema, disks(("sda", 100), ("sdb", 100))))
    assert [(p.id, p.disk_id, p.size, p.mount, p.fs_type) for p in result.partitions] == [
        ("data", "sda", 100, "/srv", "xfs"),
        ("data", "sdb", 100, "/srv", "xfs"),
    ]


def test_physical_volumes_are_the_sums_of_the_vgs_lvs_on_each_disk() -> None:
    schema = [
        *in_vg(lv("root", size=120), lv("var", size=50), vg="os"),
        *in_vg(lv("images", size=20), vg="data"),
    ]
    result = solve_payload(payload(schema, disks(("sda", 100), ("sdb", 100))))
    by_vg = {
        vg.id: [(pv.disk_id, pv.size) for pv in vg.physical_volumes] for vg in result.volume_groups
    }
    layout = {d.disk_id: {s.space_id: s.size for s in d.spaces} for d in result.disks}
    for vg_id, members in (("os", ["root", "var"]), ("data", ["images"])):
        expected = [(disk, sum(layout[disk][m] for m in members)) for disk in ("sda", "sdb")]
        assert by_vg[vg_id] == [(d, size) for d, size in expected if size > 0]
    assert sum(size for _, size in by_vg["os"]) == 170


def test_other_keys_pass_through_with_yaql_evaluated() -> None:
    schema = [
        {"id": "os", "type": "vg", "contains": [{"id": "root"}], "label": "yaql=$.node"},
        lv("root", mount="yaql=concat('/', $.node)", file_system="ext4", options={"noatime": True}),
    ]
    result = solve_payload(payload(schema, node="n1"))
    [vg] = result.volume_groups
    assert vg.attributes == {"label": "n1"}
    [root] = vg.logical_volumes
    assert (root.mount, root.attributes) == (
        "/n1",
        {"file_system": "ext4", "options": {"noatime": True}},
    )


def test_engine_run_accepts_json_text_and_returns_an_ok_envelope() -> None:
    text = json.dumps(payload(in_vg(lv("root", min_size=50), lv("swap", size=10))))
    envelope = run("partition", text)
    assert envelope.status == "ok"
    assert envelope.result is not None
    assert envelope.result["disks"][0]["spaces"] == [
        {"space_id": "root", "size": 90},
        {"space_id": "swap", "size": 10},
        {"space_id": "unallocated", "size": 0},
    ]
