"""launch_select as a caller sees it: ``apportion solve launch_select FILE``, whole job.

Run: ``.venv/bin/python bench/bench_launch_solve.py [--rounds 5] [--vs OLD_SRC]``

Per scenario, FILE is a JSON array of N copies of the job, and again of one copy;
each is solved by a fresh ``apportion solve`` process with its output written to a
file. The cost of one job is (time(N) - time(1)) / (N - 1): reading, validation,
engine, envelope and writing, without the interpreter's start-up and imports.

``--vs OLD_SRC`` runs the same files through another source tree (a ``src/`` holding
an ``apportion`` package, e.g. an exported older commit) in alternating rounds, so the
two are compared under the same machine load; the ratio is taken round by round.

``--write compact`` (the default) writes each envelope as compact JSON with orjson,
``--write pretty`` as the CLI did before the compact codec (``json.dumps(indent=2)``).
Until the CLI itself writes compact JSON, compact writing is done by this script's
driver around ``apportion.cli.main`` (it replaces the CLI's printer and the
envelope's dump, nothing else).

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

DRIVER = """
import sys
from apportion import cli
if sys.argv[1] == "compact":
    import orjson
    from apportion.contracts import Envelope

    def dump(self, **kwargs):
        return {
            "job_id": self.job_id, "kind": self.kind, "status": self.status,
            "result": self.result,
            "error": None if self.error is None else self.error.model_dump(mode="json"),
            "engine_version": self.engine_version, "elapsed_ms": self.elapsed_ms,
        }

    Envelope.model_dump = dump
    cli._print_json = lambda data: sys.stdout.buffer.write(orjson.dumps(data) + b"\\n")
sys.exit(cli.main(["solve", "launch_select", sys.argv[2]]))
"""


def run_once(src: str | None, write: str, path: Path, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one ``apportion solve`` process."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with out.open("wb") as sink:
        subprocess.run(
            [sys.executable, "-c", DRIVER, write, str(path)], stdout=sink, env=env, check=True
        )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def per_job(
    src: str | None, write: str, files: tuple[Path, Path], copies: int
) -> tuple[float, float]:
    """ms per job (wall, CPU): the N-copy file minus the one-copy file."""
    out = files[0].with_suffix(".out")
    wall_n, cpu_n = run_once(src, write, files[0], out)
    wall_1, cpu_1 = run_once(src, write, files[1], out)
    envelopes = json.loads(out.read_text())
    if envelopes[0]["status"] != "ok":
        raise SystemExit(f"{files[1]}: {envelopes[0]['status']} {envelopes[0]['error']}")
    scale = 1000.0 / (copies - 1)
    return (wall_n - wall_1) * scale, (cpu_n - cpu_1) * scale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--vs", help="another src/ directory to compare with, round by round")
    parser.add_argument(
        "--vs-write", choices=["compact", "pretty"], help="its writer (default: --write)"
    )
    parser.add_argument("--write", choices=["compact", "pretty"], default="compact")
    parser.add_argument("--only", help="run only the scenarios whose name contains this")
    parser.add_argument("--scaling", action="store_true", help="limit=10 at 250..4,000 hosts")
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
    vs_write = args.vs_write or args.write
    print(f"python {sys.version.split()[0]}; ms per job, median of {args.rounds} rounds")
    with tempfile.TemporaryDirectory() as tmp:
        for name, build, copies, target in scenarios:
            job = build()
            files = (Path(tmp) / "n.json", Path(tmp) / "one.json")
            files[0].write_text(json.dumps([job] * copies))
            files[1].write_text(json.dumps([job]))
            new: list[tuple[float, float]] = []
            old: list[tuple[float, float]] = []
            for _ in range(args.rounds):
                new.append(per_job(None, args.write, files, copies))
                if args.vs:
                    old.append(per_job(args.vs, vs_write, files, copies))
            line = f"{name:<66} this {_fmt(new)}"
            if args.vs:
                ratios = [o[0] / n[0] for n, o in zip(new, old, strict=True) if n[0] > 0]
                line += f"  vs {_fmt(old)}  speed-up {statistics.median(ratios):.2f}x"
            if target is not None:
                line += f"  target <= {target:g}"
            print(line, flush=True)


def _fmt(rows: list[tuple[float, float]]) -> str:
    wall = statistics.median(r[0] for r in rows)
    cpu = statistics.median(r[1] for r in rows)
    return f"{wall:7.1f} wall / {cpu:7.1f} cpu"


if __name__ == "__main__":
    main()
