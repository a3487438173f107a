"""What a partition job must be beyond its model's types, checked once at the edge.

The registry's partition entry names :func:`check_partition` (``JobKind.check``): the
engine runs it once, after the model has read the job and before the solver, so the
partition engine reads a job whose structure is valid and checks it nothing again.
Checked here, in this order:

* sizes against the deployment's :class:`~apportion.limits.Limits` (spaces, disks, LP
  variables), before walking a huge job;
* the hardware: disk ids unique, each disk no larger than ``partition_max_size_mib``;
* the schema's structure: space ids unique and never ``unallocated`` (the name of the
  space left free), no size key on a vg (its size is the sum of its lvs: a size there
  would be silently ignored upstream), ``contains`` only on a vg, naming only lvs, each
  in exactly one vg.

Every structural problem is collected, so that one rejection lists them all, each at the
JSON path of its field; a job whose only problems are oversized disks is over the limit
rather than invalid.

What stays in the engine (:mod:`apportion.partition.dynamic` and on): the values of a
space's size keys, ``weight``, ``best_with_disks``, ``mount`` and ``fs_type``. Any of
them may be a ``yaql=`` expression whose value exists only once the job's expressions are
evaluated (in one bounded batch, in a child process), and a job's value problems, literal
or evaluated, are reported together in one rejection in field order; so they are checked
where they are evaluated. So is infeasibility, which needs the LP.
"""

from __future__ import annotations

from apportion.contracts.partition import PartitionJob
from apportion.errors import Problem, Rejected
from apportion.limits import Limits, env_name, over_limit

# The name of the artificial space left free on each disk.
UNALLOCATED = "unallocated"

# Keys that shape the LP; a vg may carry none of them.
SIZE_KEYS = ("size", "min_size", "max_size", "weight", "best_with_disks")


def check_partition(job: PartitionJob, limits: Limits) -> PartitionJob:
    """``job`` itself once its limits, hardware and structure hold; raise :class:`Rejected`
    with every problem found otherwise."""
    _check_limits(job, limits)  # before walking a huge job
    problems: list[Problem] = []
    oversized = _check_disks(job, limits, problems)
    _check_spaces(job, problems)
    _check_volume_groups(job, problems)
    if problems and oversized == len(problems):
        raise over_limit("partition_max_size_mib", problems)
    if problems:  # a job invalid besides its disks' sizes is invalid first
        raise Rejected.of(problems)
    return job


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


def _check_disks(job: PartitionJob, limits: Limits, problems: list[Problem]) -> int:
    """Append the disks' problems; how many of them are oversized disks."""
    seen: dict[str, int] = {}
    oversized = 0
    largest = limits.partition_max_size_mib
    for j, disk in enumerate(job.hardware.disks):
        disk_id, size = disk.id, disk.size
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
            oversized += 1
            problems.append(
                Problem(
                    f"hardware.disks[{j}].size",
                    f"{size:g} MiB exceeds the largest supported size "
                    f"of {largest} MiB "
                    f"(raise {env_name('partition_max_size_mib')})",
                )
            )
    return oversized


def _check_spaces(job: PartitionJob, problems: list[Problem]) -> None:
    seen: dict[str, int] = {}
    for i, space in enumerate(job.spaces):
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
        if space_type == "vg":
            # Every size key is a field of the model, so a job's extra keys never are one.
            given = space.model_fields_set
            problems.extend(
                Problem(
                    f"schema[{i}].{key}",
                    "a vg takes no size: its size is the sum of "
                    "its logical volumes; set sizes on the lvs",
                )
                for key in SIZE_KEYS
                if key in given and getattr(space, key, None) is not None
            )
        elif space.contains is not None:
            problems.append(
                Problem(f"schema[{i}].contains", f"only a vg contains spaces, not a {space_type}")
            )


def _check_volume_groups(job: PartitionJob, problems: list[Problem]) -> None:
    spaces = job.spaces
    first: dict[str, int] = {}  # space id -> its first position (lookups use the first)
    for i, space in enumerate(spaces):
        first.setdefault(space.id, i)
    vg_of: dict[str, str] = {}
    # lv id -> the JSON path of its place in its vg, should a later vg list it again
    where: dict[str, str] = {}
    for i, space in enumerate(spaces):
        if space.type != "vg":
            continue
        for j, ref in enumerate(space.contains or ()):
            ref_id, path = ref.id, f"schema[{i}].contains[{j}].id"
            target = first.get(ref_id)
            target_type = None if target is None else spaces[target].type
            if target_type is None:
                problems.append(Problem(path, f"unknown space {ref_id!r}"))
            elif target_type != "lv":
                message = f"{ref_id!r} is a {target_type}; a vg contains only lvs"
                problems.append(Problem(path, message))
            elif ref_id in vg_of:
                problems.append(
                    Problem(
                        path,
                        f"lv {ref_id!r} is already in vg {vg_of[ref_id]!r} "
                        f"({where[ref_id]}); an lv belongs to one vg",
                    )
                )
            else:
                vg_of[ref_id] = space.id
                where[ref_id] = path
    problems.extend(
        Problem(
            f"schema[{i}]",
            f"lv {space.id!r} is not contained in any vg; list it in a vg's `contains`",
        )
        for i, space in enumerate(spaces)
        if space.type == "lv" and space.id not in vg_of and first[space.id] == i
    )
