"""launch_select as a caller sees it: ``apportion solve launch_select FILE``, whole job.

Run: ``.venv/bin/python bench/bench_launch_solve.py [--rounds 5] [--vs PYTHONPATH]
[--collector paused|on|both]``

Per scenario, FILE is a JSON array of N copies of the job, and again of one copy;
each is solved by a fresh ``python -m apportion.cli solve launch_select FILE``
process writing to a file (compact JSON, as ``solve`` writes when not on a terminal).
The cost of one job is (time(N) - time(1)) / (N - 1): reading, validation, engine,
envelope and writing, without the interpreter's start-up and imports.

``--collector on`` runs ``solve`` with the cyclic collector left running, as a
worker's pool child runs a job (``both``: each round both ways).

``--vs PYTHONPATH`` runs the same files through another source tree in alternating
rounds, so both are measured under the same machine load and the ratio is taken
round by round. For an exported commit of this repository that is ``TREE/src`` (with
``config``, ``workers`` and ``tasks`` linked into ``TREE/src/apportion`` once they
are packages there) or ``TREE/src:TREE`` for commits before that. Each tree writes
as its own CLI does.

Figures are recorded in bench/placement.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_placement import SIMPLE, SUBTREE, isolated_vgpus, numa_cloud, vgpu_host

# (name, job builder, copies, target ms per job)
SCENARIOS: list[tuple[str, Callable[[], dict[str, Any]], int, float | None]] = [
    (
        "1,000 hosts x 2 NUMA + sharing disk, flat (4,000 candidates)",
        lambda: {"providers": numa_cloud(1000), "request": SIMPLE, "policy": None},
        5,
        28,
    ),
    (
        "same, same_subtree (2,000 candidates)",
        lambda: {"providers": numa_cloud(1000), "request": SUBTREE, "policy": None},
        5,
        22,
    ),
    (
        "1 root, 8 VGPU children, 6 isolated groups, cap 10,000",
        lambda: {"providers": vgpu_host(), "request": isolated_vgpus(6), "policy": None},
        4,
        700,
    ),
    (
        "same, 8 groups, limit 1,000",
        lambda: {"providers": vgpu_host(), "request": isolated_vgpus(8, 1000), "policy": None},
        9,
        60,
    ),
]
SCALING = [250, 500, 1000, 2000, 4000]


# ``apportion solve`` as a worker's pool child runs a job: the engine imported first and
# what is loaded frozen (the worker does both before its pool forks), then the cyclic
# collector left running while the jobs are decoded and solved (the CLI's pause is
# replaced by a block that does nothing).
COLLECTOR_ON = (
    "import contextlib, gc, sys; "
    "import apportion.cli.solve as s, apportion.cli.common, apportion.engine_settings, "
    "apportion.launch, apportion.selection, apportion.edge; "
    "s.collector_paused = contextlib.nullcontext; gc.collect(); gc.freeze(); "
    "from apportion.cli import main; sys.exit(main())"
)


def solve_command(path: Path, collector: str = "paused") -> list[str]:
    """The ``apportion solve launch_select`` command line; ``collector``: ``paused`` (the
    CLI as it is) or ``on`` (the collector running, as in a worker)."""
    head = ["-m", "apportion.cli"] if collector == "paused" else ["-c", COLLECTOR_ON]
    return [sys.executable, *head, "solve", "launch_select", str(path)]


def run_once(
    src: str | None, path: Path, out: Path, collector: str = "paused"
) -> tuple[float, float]:
    """Wall and CPU seconds of one ``apportion solve`` process writing to ``out``."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with out.open("wb") as sink:
        subprocess.run(
            solve_command(path, collector),
            stdout=sink,
            env=env,
            cwd=out.parent,  # not the checkout: its folders must not shadow the tree's
            check=True,
        )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def per_job(
    src: str | None, files: tuple[Path, Path], copies: int, collector: str = "paused"
) -> tuple[float, float]:
    """ms per job (wall, CPU): the N-copy file minus the one-copy file."""
    out = files[0].with_suffix(".out")
    wall_n, cpu_n = run_once(src, files[0], out, collector)
    wall_1, cpu_1 = run_once(src, files[1], out, collector)
    envelopes = json.loads(out.read_text())
    if envelopes[0]["status"] != "ok":
        raise SystemExit(f"{files[1]}: {envelopes[0]['status']} {envelopes[0]['error']}")
    scale = 1000.0 / (copies - 1)
    return (wall_n - wall_1) * scale, (cpu_n - cpu_1) * scale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--vs", help="PYTHONPATH of another source tree, measured in turn")
    parser.add_argument("--only", help="run only the scenarios whose name contains this")
    parser.add_argument("--scaling", action="store_true", help="limit=10 at 250..4,000 hosts")
    parser.add_argument(
        "--collector",
        choices=["paused", "on", "both"],
        default="paused",
        help="the cyclic collector paused while solving (the CLI's own way), left on as in "
        "a worker's pool child, or both in turn",
    )
    args = parser.parse_args()
    scenarios = list(SCENARIOS)
    if args.scaling:
        scenarios = [
            (
                f"scaling: {h} hosts x 2 NUMA + 10 sharing disks, same_subtree, limit 10",
                lambda h=h: {
                    "providers": numa_cloud(h, 10),
                    "request": SUBTREE + "&limit=10",
                    "policy": None,
                },
                5,
                None,
            )
            for h in SCALING
        ]
    if args.only:
        scenarios = [s for s in scenarios if args.only in s[0]]
    modes = ["paused", "on"] if args.collector == "both" else [args.collector]
    print(f"python {sys.version.split()[0]}; ms per job, median of {args.rounds} rounds")
    with tempfile.TemporaryDirectory() as tmp:
        for name, build, copies, target in scenarios:
            job = build()
            files = (Path(tmp) / "n.json", Path(tmp) / "one.json")
            files[0].write_text(json.dumps([job] * copies))
            files[1].write_text(json.dumps([job]))
            new: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
            old: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
            for _ in range(args.rounds):
                for mode in modes:
                    new[mode].append(per_job(None, files, copies, mode))
                    if args.vs:
                        old[mode].append(per_job(args.vs, files, copies, mode))
            for mode in modes:
                print(_line(name, mode, new[mode], old[mode], target), flush=True)


def _line(
    name: str,
    mode: str,
    new: list[tuple[float, float]],
    old: list[tuple[float, float]],
    target: float | None,
) -> str:
    line = f"{name:<66} collector {mode:<6} this {_fmt(new)}"
    if old:
        wall = [o[0] / n[0] for n, o in zip(new, old, strict=True) if n[0] > 0]
        cpu = [o[1] / n[1] for n, o in zip(new, old, strict=True) if n[1] > 0]
        line += f"  vs {_fmt(old)}  speed-up {_mid(wall):.2f}x wall, {_mid(cpu):.2f}x cpu"
    if target is not None:
        line += f"  target <= {target:g}"
    return line


def _mid(ratios: list[float]) -> float:
    """The median ratio; NaN when no round gave one (a negative difference of two runs)."""
    return statistics.median(ratios) if ratios else float("nan")


def _fmt(rows: list[tuple[float, float]]) -> str:
    wall = statistics.median(r[0] for r in rows)
    cpu = statistics.median(r[1] for r in rows)
    return f"{wall:7.1f} wall / {cpu:7.1f} cpu"


if __name__ == "__main__":
    main()
