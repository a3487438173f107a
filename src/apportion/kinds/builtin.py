"""The job kinds apportion ships with, one entry each."""

from __future__ import annotations

from apportion.contracts.attach import (
    AutoAttachJob,
    AutoAttachResult,
    GuestHostAttachJob,
    GuestHostAttachResult,
)
from apportion.contracts.events import LaunchOutcomeJob, LaunchOutcomeResult
from apportion.contracts.heal import HealOrgJob, HealOrgResult
from apportion.contracts.launch import LaunchSelectJob, LaunchSelectResult
from apportion.contracts.partition import PartitionJob, PartitionResult
from apportion.kinds.spec import JobKind

AUTO_ATTACH = JobKind(
    name="auto_attach",
    summary="which subscription pools, and how many, cover a consumer's products "
    "(Candlepin semantics; rule profiles seed, candlepin-5.42, candlepin-5.44)",
    job=AutoAttachJob,
    result=AutoAttachResult,
    check="apportion.contracts.attach_checks:check_auto_attach",
    solver="apportion.attach:solve_auto_attach",
    queue="attach",
    soft_time_limit=60,
    time_limit=90,
    explain="apportion.explain:explain_auto_attach",
    demo_jobs="apportion.workers.demo.jobs:AUTO_ATTACH_JOBS",
)

GUEST_HOST_ATTACH = JobKind(
    name="guest_host_attach",
    summary="which virt_limit pools a guest's host attaches, the derived pools that "
    "creates, and what the guest then attaches",
    job=GuestHostAttachJob,
    result=GuestHostAttachResult,
    check="apportion.contracts.attach_checks:check_guest_host_attach",
    solver="apportion.attach:solve_guest_host_attach",
    queue="attach",
    soft_time_limit=60,
    time_limit=90,
    explain="apportion.explain:explain_guest_host_attach",
    demo_jobs="apportion.workers.demo.jobs:GUEST_HOST_ATTACH_JOBS",
)

HEAL_ORG = JobKind(
    name="heal_org",
    summary="auto_attach for every consumer of an organisation in turn, each seeing the "
    "pools the earlier ones consumed (Candlepin's heal-entire-org loop)",
    job=HealOrgJob,
    result=HealOrgResult,
    check="apportion.contracts.attach_checks:check_heal_org",
    solver="apportion.attach:solve_heal_org",
    queue="attach",
    # The attach queue's limits, so that an operator's limits for the queue keep working;
    # the loop answers what it healed by Limits.heal_seconds, below the soft limit.
    soft_time_limit=60,
    time_limit=90,
    explain="apportion.explain:explain_heal_org",
    demo_jobs="apportion.workers.demo.jobs:HEAL_ORG_JOBS",
)

LAUNCH_SELECT = JobKind(
    name="launch_select",
    summary="allocation candidates over nested provider trees (OpenStack Placement "
    "semantics), then an administrator's stackable probability policy and the dice",
    job=LaunchSelectJob,
    result=LaunchSelectResult,
    solver="apportion.launch:solve",
    queue="launch",
    soft_time_limit=30,
    time_limit=45,
    hooks=("launcher", "remember"),
    explain="apportion.explain:explain_launch_select",
    demo_jobs="apportion.workers.demo.jobs:LAUNCH_JOBS",
)

PARTITION = JobKind(
    name="partition",
    summary="how to lay out partitions, LVM volume groups and logical volumes on a "
    "node's disks from a dynamic (yaql) schema: the Bareon LP, exact in whole MiB",
    job=PartitionJob,
    result=PartitionResult,
    check="apportion.contracts.partition_checks:check_partition",
    solver="apportion.partition:solve",
    queue="partition",
    soft_time_limit=60,
    time_limit=90,
    explain="apportion.explain:explain_partition",
    demo_jobs="apportion.workers.demo.jobs:PARTITION_JOBS",
)

LAUNCH_OUTCOME = JobKind(
    name="launch_outcome",
    summary="(event) a launch failed or succeeded: recorded once per event_id in the "
    "failure-history store that the failure_penalty policy module reads",
    job=LaunchOutcomeJob,
    result=LaunchOutcomeResult,
    solver="apportion.outcome:solve",
    queue="events",
    soft_time_limit=10,
    time_limit=20,
    # One launch job can fail several times: each event is its own unit of work.
    id_field="event_id",
    explain="apportion.explain:explain_launch_outcome",
    demo_jobs="apportion.workers.demo.jobs:OUTCOME_JOBS",
)

BUILTIN: tuple[JobKind, ...] = (
    AUTO_ATTACH,
    GUEST_HOST_ATTACH,
    HEAL_ORG,
    LAUNCH_SELECT,
    PARTITION,
    LAUNCH_OUTCOME,
)
