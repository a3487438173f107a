"""Partition engine benchmark: 24 disks × 40 spaces, median engine time (target ≤ 100 ms).

Run: ``.venv/bin/python bench/bench_partition.py [--repeat N] [--profile]``

The job mixes everything the engine handles: two volume groups of lvs and a set of
partitions; min_size, max_size, size, weights (fair-share groups with 2:1 and 3:1
ratios whose LP answer is fractional, so the whole-MiB MILP step runs), best_with_disks
on SSDs, and yaql for sizes (from RAM) and disk selection. It is timed through
``apportion.engine.run`` — validation, yaql (one forked child), LP, integer step and
conversion included — the same call the Celery task makes.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from typing import Any

from apportion.engine import Context, run


def make_job(n_disks: int = 24, n_spaces: int = 40) -> dict[str, Any]:
    disks = []
    for d in range(n_disks):
        ssd = d % 6 == 5
        disks.append(
            {
                "id": f"disk{d:02d}",
                "size": (240_000 if ssd else 1_907_729 + 1_000 * d),  # MiB: SSDs and HDDs
                "type": "ssd" if ssd else "hdd",
                "path": f"/dev/disk/by-path/pci-0000:00:1f.2-ata-{d}",
            }
        )
    lvs_os = ["root", "swap", "var", "log", "tmp", "home"]
    spaces: list[dict[str, Any]] = [
        {"id": "os", "type": "vg", "contains": [{"id": i} for i in lvs_os]},
        {
            "id": "root",
            "type": "lv",
            "min_size": 51_200,
            "max_size": 204_800,
            "mount": "/",
            "fs_type": "ext4",
        },
        {
            "id": "swap",
            "type": "lv",
            "fs_type": "swap",
            "size": "yaql=let(ram => $.get(ram, 1024)) -> selectCase($ram <= 2048, "
            "$ram > 2048 and $ram < 8192, $ram > 8192 and $ram < 65536)"
            ".switchCase($ram * 2, $ram, $ram / 2, 4096)",
        },
        {"id": "var", "type": "lv", "min_size": 20_480, "weight": 2, "mount": "/var"},
        {"id": "log", "type": "lv", "min_size": 20_480, "weight": 1, "mount": "/var/log"},
        {"id": "tmp", "type": "lv", "size": "yaql=$.ram / 4", "mount": "/tmp"},
        {"id": "home", "type": "lv", "max_size": "yaql=$.disks.len() * 10240", "mount": "/home"},
    ]
    n_images = (n_spaces - len(spaces) - 1) // 2
    images = [f"image{i:02d}" for i in range(n_images)]
    spaces.append({"id": "images", "type": "vg", "contains": [{"id": i} for i in images]})
    for i, name in enumerate(images):
        space: dict[str, Any] = {"id": name, "type": "lv", "fs_type": "xfs"}
        kind = i % 4
        if kind == 0:
            space.update(min_size=102_400, weight=3)
        elif kind == 1:
            space.update(min_size=102_400, weight=1)
        elif kind == 2:
            space.update(max_size=1_048_576)
        else:
            space.update(size=512_000 + 1_024 * i)
        spaces.append(space)
    p = 0
    while sum(1 for s in spaces if s["type"] != "vg") < n_spaces:
        space = {"id": f"part{p:02d}", "type": "partition"}
        if p % 3 == 0:
            space.update(
                best_with_disks='yaql=$.disks.where($.type = "ssd")',
                max_size=409_600,
                fs_type="xfs",
                mount=f"/srv/journal{p}",
            )
        elif p % 3 == 1:
            space.update(size=1_024 * (p + 1), fs_type="ext4", mount=f"/srv/data{p}")
        else:
            space.update(min_size=10_240, best_with_disks=["disk00", "disk01"], mount="/boot")
        spaces.append(space)
        p += 1
    return {
        "job_id": "bench-partition",
        "schema": spaces,
        "hardware": {"ram": 65_536 - 1024, "disks": disks},
    }


def _phases(job: dict[str, Any], repeat: int) -> dict[str, float]:
    """Median ms of each engine stage (the code path of `solve`, timed piecewise)."""
    from apportion.contracts.partition import PartitionJob
    from apportion.engine import validate
    from apportion.partition import convert, dynamic, feasibility, integer, lp, model, schema

    ctx = Context()
    samples: dict[str, list[float]] = {}

    def lap(name: str, since: float) -> float:
        now = time.perf_counter()
        samples.setdefault(name, []).append((now - since) * 1000)
        return now

    for _ in range(repeat):
        t = time.perf_counter()
        parsed_job = validate("partition", job)
        assert isinstance(parsed_job, PartitionJob)
        t = lap("validate (pydantic)", t)
        parsed = schema.parse(parsed_job, ctx.limits)
        t = lap("schema", t)
        resolved = dynamic.resolve(parsed, ctx.limits)
        t = lap("yaql + values", t)
        problem = model.build(parsed.disks, resolved.spaces)
        feasibility.diagnose(problem)
        t = lap("model + feasibility", t)
        relaxed = lp.solve(problem)
        assert relaxed is not None
        t = lap("LP (HiGHS)", t)
        whole = integer.solve(problem, relaxed, time_limit=10)
        t = lap(f"integer step ({whole.method})", t)
        convert.to_result(parsed, resolved, problem, whole.x).model_dump(mode="json")
        lap("convert + dump", t)
    return {name: statistics.median(v) for name, v in samples.items()}


def _fork_cost(repeat: int) -> float:
    """Median ms of a yaql batch of one trivial expression the cost check leaves to a
    child (``range`` is never proven cheap): fork, pipe, JSON, reap."""
    from apportion.limits import DEFAULT_LIMITS
    from apportion.yaql_eval import evaluate_batch

    evaluate_batch({"x": "range(0, 1).len()"}, {}, DEFAULT_LIMITS)
    wall = []
    for _ in range(repeat):
        started = time.perf_counter()
        evaluate_batch({"x": "range(0, 1).len()"}, {}, DEFAULT_LIMITS)
        wall.append((time.perf_counter() - started) * 1000)
    return statistics.median(wall)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--disks", type=int, default=24)
    parser.add_argument("--spaces", type=int, default=40)
    parser.add_argument("--profile", action="store_true", help="print a pyinstrument profile")
    args = parser.parse_args()

    job = make_job(args.disks, args.spaces)
    ctx = Context()
    first = run("partition", job, ctx)  # warm-up: imports, yaql engine and context
    if first.status != "ok":
        print(json.dumps(first.model_dump(mode="json"), indent=2))
        return 1
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0005)
        profiler.start()
        for _ in range(args.repeat):
            run("partition", job, ctx)
        profiler.stop()
        print(profiler.output_text(unicode=True, color=False))
        return 0
    wall = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        envelope = run("partition", job, ctx)
        wall.append((time.perf_counter() - started) * 1000)
        assert envelope.status == "ok"
    n_spaces = sum(1 for s in job["schema"] if s["type"] != "vg")
    print(
        f"partition: {args.disks} disks × {len(job['schema'])} schema entries "
        f"({n_spaces} lvs/partitions) on {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}"
    )
    print(
        f"  runs {len(wall)}: median {statistics.median(wall):.1f} ms, "
        f"min {min(wall):.1f} ms, max {max(wall):.1f} ms"
    )
    for name, ms in _phases(job, args.repeat).items():
        print(f"  {name:<34}{ms:7.2f} ms")
    fork = _fork_cost(args.repeat)
    print(f"  {'yaql child alone (fork+pipe+reap)':<34}{fork:7.2f} ms")
    return 0 if statistics.median(wall) <= 100 else 2


if __name__ == "__main__":
    sys.exit(main())
