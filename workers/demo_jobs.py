"""The jobs the embedded demo runs: (kind, title, job). One list, grown per engine."""

from __future__ import annotations

from typing import Any

DemoJob = tuple[str, str, dict[str, Any]]

_SWAP_BY_RAM = (
    "yaql=let(ram => $.get(ram, 1024)) -> selectCase($ram <= 2048, "
    "$ram > 2048 and $ram < 8192, $ram > 8192 and $ram < 65536)"
    ".switchCase($ram * 2, $ram, $ram / 2, 4096)"
)

PARTITION_JOBS: list[DemoJob] = [
    (
        "partition",
        "LVM root + swap sized from RAM by yaql, ceph journal preferring SSDs",
        {
            "job_id": "demo-partition-node1",
            "schema": [
                {"id": "os", "type": "vg", "contains": [{"id": "root"}, {"id": "swap"}]},
                {"id": "root", "type": "lv", "min_size": 20000, "mount": "/", "fs_type": "ext4"},
                {"id": "swap", "type": "lv", "size": _SWAP_BY_RAM, "fs_type": "swap"},
                {
                    "id": "ceph-journal",
                    "type": "partition",
                    "max_size": 20000,
                    "best_with_disks": 'yaql=$.disks.where($.type = "ssd")',
                },
            ],
            "hardware": {
                "ram": 4096,
                "disks": [
                    {"id": "sda", "size": 60000, "type": "hdd"},
                    {"id": "sdb", "size": 120000, "type": "hdd"},
                    {"id": "sdc", "size": 16000, "type": "ssd"},
                ],
            },
        },
    ),
    (
        "partition",
        "fair shares: /var and /srv with weights 2:1 after a fixed /boot",
        {
            "job_id": "demo-partition-weights",
            "schema": [
                {"id": "boot", "type": "partition", "size": 512, "mount": "/boot"},
                {"id": "var", "type": "partition", "min_size": 1000, "weight": 2, "mount": "/var"},
                {"id": "srv", "type": "partition", "min_size": 1000, "weight": 1, "mount": "/srv"},
            ],
            "hardware": {"ram": 8192, "disks": [{"id": "vda", "size": 30512, "type": "hdd"}]},
        },
    ),
    (
        "partition",
        "infeasible: two 80 GB minimums on a 100 GB disk",
        {
            "job_id": "demo-partition-too-small",
            "schema": [
                {"id": "data", "type": "partition", "min_size": 80000},
                {"id": "logs", "type": "partition", "min_size": 80000},
            ],
            "hardware": {"disks": [{"id": "sda", "size": 100000}]},
        },
    ),
    (
        "partition",
        "rejected: a space without an id, an unknown type, a disk size that is not a number",
        {
            "job_id": "demo-partition-malformed",
            "schema": [
                {"type": "lv", "size": 100},
                {"id": "tmp", "type": "raid0", "size": 5},
            ],
            "hardware": {"disks": [{"id": "sda", "size": "big"}]},
        },
    ),
]

DEMO_JOBS: list[DemoJob] = [*PARTITION_JOBS]
