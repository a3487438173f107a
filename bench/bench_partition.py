"""Partition benchmark: 24 disks × 40 spaces, the whole job as a caller sees it.

Run: ``.venv/bin/python bench/bench_partition.py [--repeat N] [--profile]`` for the
engine (``apportion.engine.run``) and its stages, CPU time per stage;
``--whole [--baseline-src DIR]`` for the target (≤ 15 ms a job): ``apportion solve
partition FILE`` on a JSON array of N copies minus the same on one copy, per job
(reading, validation, engine, envelope, writing), in fresh processes. With
``--baseline-src`` (the ``src`` folder of another checkout, e.g. ``git worktree`` or
``git archive`` of the previous commit) the two trees alternate round by round and
the paired ratios are printed: the machine's drift hits both alike.

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
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
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
    """Median CPU ms of each engine stage (the code path of `solve`, timed piecewise)."""
    from apportion.contracts.partition import PartitionJob
    from apportion.contracts.partition_checks import check_partition
    from apportion.engine import validate
    from apportion.partition import convert, dynamic, feasibility, integer, lp, model, schema

    ctx = Context()
    samples: dict[str, list[float]] = {}

    def lap(name: str, since: float) -> float:
        now = time.process_time()
        samples.setdefault(name, []).append((now - since) * 1000)
        return now

    for _ in range(repeat):
        t = time.process_time()
        parsed_job = validate("partition", job)
        assert isinstance(parsed_job, PartitionJob)
        t = lap("validate (pydantic)", t)
        check_partition(parsed_job, ctx.limits)
        t = lap("check", t)
        parsed = schema.parse(parsed_job)
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
        convert.to_result(parsed, resolved, problem, whole.x)
        lap("convert", t)
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


def _solve_once(src: str | None, path: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one ``apportion solve partition`` process."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "apportion.cli", "solve", "partition", str(path)],
        env=env,
        stdout=subprocess.DEVNULL,
        check=True,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def per_job(src: str | None, one: Path, many: Path, copies: int) -> tuple[float, float]:
    """Wall and CPU ms per job: N copies minus one copy, divided by N − 1."""
    wall_1, cpu_1 = _solve_once(src, one)
    wall_n, cpu_n = _solve_once(src, many)
    return (wall_n - wall_1) / (copies - 1) * 1000, (cpu_n - cpu_1) / (copies - 1) * 1000


def whole_job(job: dict[str, Any], copies: int, rounds: int, baseline: str | None) -> float:
    """Print per-job medians (and paired ratios against ``baseline``); the median wall ms."""
    trees: dict[str, str | None] = {"this tree": None}
    if baseline is not None:
        trees = {"baseline": baseline, **trees}
    with tempfile.TemporaryDirectory() as folder:
        one, many = Path(folder, "one.json"), Path(folder, "many.json")
        one.write_text(json.dumps([job]))
        many.write_text(json.dumps([{**job, "job_id": f"copy-{i}"} for i in range(copies)]))
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
        for r in range(rounds):
            names = list(trees) if r % 2 == 0 else list(reversed(trees))
            for name in names:
                results[name].append(per_job(trees[name], one, many, copies))
    for name, samples in results.items():
        wall, cpu = zip(*samples, strict=True)
        print(
            f"  {name:<10} per job: wall median {statistics.median(wall):6.2f} ms "
            f"(min {min(wall):.2f}), CPU median {statistics.median(cpu):6.2f} ms "
            f"(min {min(cpu):.2f}) over {rounds} rounds of {copies} − 1 copies"
        )
    if baseline is not None:
        for i, what in ((0, "wall"), (1, "CPU")):
            pairs = zip(results["baseline"], results["this tree"], strict=True)
            ratio = statistics.median(b[i] / n[i] for b, n in pairs)
            print(f"  paired {what} ratio baseline / this tree: median {ratio:.2f}")
    return statistics.median(w for w, _ in results["this tree"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--disks", type=int, default=24)
    parser.add_argument("--spaces", type=int, default=40)
    parser.add_argument("--profile", action="store_true", help="print a pyinstrument profile")
    parser.add_argument("--whole", action="store_true", help="time `apportion solve` per job")
    parser.add_argument("--copies", type=int, default=51, help="jobs in the --whole array")
    parser.add_argument("--rounds", type=int, default=7, help="--whole rounds (per tree)")
    parser.add_argument("--baseline-src", help="--whole: the src folder of the tree to pair with")
    args = parser.parse_args()

    job = make_job(args.disks, args.spaces)
    if args.whole:
        median = whole_job(job, args.copies, args.rounds, args.baseline_src)
        return 0 if median <= 15 else 2
    ctx = Context()
    first = run("partition", job, ctx)  # warm-up: imports, yaql engine and context
    if first.status != "ok":
        print(json.dumps(first.as_dict(), indent=2))
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
        print(f"  {name:<34}{ms:7.2f} ms CPU")
    fork = _fork_cost(args.repeat)
    print(f"  {'a yaql child (fork+pipe+reap)':<34}{fork:7.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
