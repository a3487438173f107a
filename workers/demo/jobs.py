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


def _inventory(total: int) -> dict[str, int]:
    return {"total": total}


ATTACH_JOBS: list[DemoJob] = [
    (
        "auto_attach",
        "the seed's pool-priority worked example (score 9028.5)",
        {
            "job_id": "demo-attach-seed-example",
            "consumer": {
                "uuid": "c-1",
                "facts": {"cpu.cpu_socket(s)": "2", "uname.machine": "x86_64"},
                "installed_products": ["product1"],
                "role": "my_role",
                "usage": "my_usage",
            },
            "pools": [
                {
                    "id": "pool-1",
                    "product_id": "sku-1",
                    "quantity": 10,
                    "product_attributes": {"roles": "my_role", "usage": "different_usage"},
                    "provided_products": ["product1"],
                }
            ],
            "at": "2026-11-21T00:00:00Z",
        },
    ),
    (
        "auto_attach",
        "an 8-socket server: 2-socket stackable pool vs a 1-socket one (best fit wins)",
        {
            "job_id": "demo-attach-stack",
            "consumer": {
                "uuid": "server-8s",
                "facts": {"cpu.cpu_socket(s)": "8", "uname.machine": "x86_64"},
                "installed_products": ["rhel"],
            },
            "pools": [
                {
                    "id": "one-socket",
                    "product_id": "rhel-1s",
                    "quantity": 20,
                    "product_attributes": {
                        "sockets": "1",
                        "stacking_id": "rhel",
                        "multi-entitlement": "yes",
                    },
                    "provided_products": ["rhel"],
                },
                {
                    "id": "two-socket",
                    "product_id": "rhel-2s",
                    "quantity": 20,
                    "product_attributes": {
                        "sockets": "2",
                        "stacking_id": "rhel",
                        "multi-entitlement": "yes",
                    },
                    "provided_products": ["rhel"],
                },
            ],
        },
    ),
    (
        "guest_host_attach",
        "a guest whose product only comes through its host's unlimited-virt pool",
        {
            "job_id": "demo-guest",
            "host": {
                "uuid": "host-1",
                "type": "hypervisor",
                "facts": {"cpu.cpu_socket(s)": "2", "uname.machine": "x86_64"},
            },
            "guest": {
                "uuid": "guest-1",
                "facts": {
                    "virt.is_guest": "true",
                    "virt.uuid": "guest-1",
                    "uname.machine": "x86_64",
                },
                "installed_products": ["rhel"],
            },
            "pools": [
                {
                    "id": "dc-pool",
                    "product_id": "datacenter-sku",
                    "quantity": 4,
                    "product_attributes": {
                        "virt_limit": "unlimited",
                        "stacking_id": "dc",
                        "multi-entitlement": "yes",
                        "sockets": "2",
                    },
                    "derived_product_id": "datacenter-guest-sku",
                    "derived_provided_products": ["rhel"],
                }
            ],
        },
    ),
]


def _numa_fpga_providers() -> list[dict[str, object]]:
    cpu = {"VCPU": _inventory(4), "MEMORY_MB": _inventory(2048)}
    return [
        {"uuid": "cn"},
        {
            "uuid": "numa0",
            "parent_provider_uuid": "cn",
            "inventories": cpu,
            "traits": ["HW_NUMA_ROOT"],
        },
        {
            "uuid": "numa1",
            "parent_provider_uuid": "cn",
            "inventories": cpu,
            "traits": ["HW_NUMA_ROOT"],
        },
        {
            "uuid": "fpga0_0",
            "parent_provider_uuid": "numa0",
            "inventories": {"FPGA": _inventory(1)},
        },
        {
            "uuid": "fpga1_0",
            "parent_provider_uuid": "numa1",
            "inventories": {"FPGA": _inventory(1)},
        },
        {
            "uuid": "fpga1_1",
            "parent_provider_uuid": "numa1",
            "inventories": {"FPGA": _inventory(1)},
        },
    ]


def cloud_providers() -> list[dict[str, object]]:
    """Three accounts: two private vSphere clusters (a twice b) and EC2 for spillover."""
    host = {"VCPU": _inventory(32), "MEMORY_MB": _inventory(131072)}
    return [
        {
            "uuid": "vsphere-a-host1",
            "account": "vsphere-a",
            "inventories": host,
            "usages": {"VCPU": 8},
            "prices": {"VCPU": 0.02},
        },
        {
            "uuid": "vsphere-a-host2",
            "account": "vsphere-a",
            "inventories": host,
            "prices": {"VCPU": 0.02},
        },
        {
            "uuid": "vsphere-b-host1",
            "account": "vsphere-b",
            "inventories": host,
            "usages": {"VCPU": 20},
            "prices": {"VCPU": 0.02},
        },
        {"uuid": "ec2-east", "account": "ec2", "inventories": host, "prices": {"VCPU": 0.1}},
    ]


CLOUD_ACCOUNTS = {
    "vsphere-a": {"priority": 10, "weight": 2},
    "vsphere-b": {"priority": 10, "weight": 1},
    "ec2": {"priority": 1, "cost_per_hour": 0.4},
}
CLOUD_POLICY: list[dict[str, object]] = [
    {"module": "equal"},
    {"module": "weights"},
    {"module": "failure_penalty", "percent": 5, "window_hours": 6},
    {"module": "priority", "mode": "strict"},
]

LAUNCH_JOBS: list[DemoJob] = [
    (
        "launch_select",
        "same_subtree: VCPU and an FPGA from the same NUMA node (candidates only)",
        {
            "job_id": "demo-candidates-numa-fpga",
            "providers": _numa_fpga_providers(),
            "request": "resources_COMPUTE=VCPU:1,MEMORY_MB:256&resources_ACCEL=FPGA:1"
            "&same_subtree=_COMPUTE,_ACCEL",
            "policy": None,
        },
    ),
    (
        "launch_select",
        "three accounts: weights 2:1, a failure penalty, EC2 as strict spillover",
        {
            "job_id": "demo-launch-policy",
            "providers": cloud_providers(),
            "request": "resources=VCPU:2,MEMORY_MB:4096",
            "accounts": CLOUD_ACCOUNTS,
            "policy": CLOUD_POLICY,
            "failures": {"vsphere-a": 2},
            "seed": 42,
        },
    ),
]

OUTCOME_JOBS: list[DemoJob] = [
    (
        "launch_outcome",
        "a launch-failure event (sent twice: recorded once)",
        {
            "event_id": "demo-evt-1",
            "account": "vsphere-b",
            "outcome": "failed",
            # No `at`: the event happened when the worker takes it, on any date the demo
            # runs (a fixed time would age out of the failure history and not be recorded).
            "job_id": "demo-launch-policy",
            "reason": "quota exceeded",
        },
    ),
]

# The failure-penalty dynamics: vsphere-a fails 70% of its launches under the simulated
# launcher; successive launches read the growing history and shift probability away.
FLAKY_ACCOUNT = "vsphere-a"
FLAKY_RATE = 0.7
DYNAMICS_PENALTY = 10  # percentage points per failure (the seed's 5 is gentler)


def dynamics_job(n: int) -> dict[str, object]:
    policy = [
        {**m, "percent": DYNAMICS_PENALTY} if m["module"] == "failure_penalty" else m
        for m in CLOUD_POLICY
    ]
    return {
        "job_id": f"demo-dynamics-{n}",
        "providers": cloud_providers(),
        "request": "resources=VCPU:2,MEMORY_MB:4096",
        "accounts": CLOUD_ACCOUNTS,
        "policy": policy,
        "seed": 1000 + n,
    }


# Each kind's entry in apportion.kinds names its list (JobKind.demo_jobs).
AUTO_ATTACH_JOBS: list[DemoJob] = [job for job in ATTACH_JOBS if job[0] == "auto_attach"]
GUEST_HOST_ATTACH_JOBS: list[DemoJob] = [
    job for job in ATTACH_JOBS if job[0] == "guest_host_attach"
]


def _heal_consumer(uuid: str, sockets: str) -> dict[str, object]:
    facts = {"cpu.cpu_socket(s)": sockets, "uname.machine": "x86_64"}
    return {"consumer": {"uuid": uuid, "facts": facts, "installed_products": ["rhel"]}}


HEAL_ORG_JOBS: list[DemoJob] = [
    (
        "heal_org",
        "heal an organisation: servers share a 6-entitlement stack; the third finds it "
        "used up and takes the single pool, the fourth finds nothing left",
        {
            "job_id": "demo-heal-org",
            "rules": "candlepin-5.44",
            "pools": [
                {
                    "id": "rhel-2s",
                    "product_id": "rhel-2-socket",
                    "quantity": 6,
                    "product_attributes": {
                        "sockets": "2",
                        "stacking_id": "rhel",
                        "multi-entitlement": "yes",
                    },
                    "provided_products": ["rhel"],
                },
                {
                    "id": "rhel-premium",
                    "product_id": "rhel-premium",
                    "quantity": 1,
                    "product_attributes": {"support_level": "Premium"},
                    "provided_products": ["rhel"],
                },
            ],
            "consumers": [
                _heal_consumer("server-1", "4"),
                _heal_consumer("server-2", "8"),
                _heal_consumer("server-3", "2"),
                _heal_consumer("server-4", "2"),
            ],
        },
    ),
]
