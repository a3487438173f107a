"""A big launch_select job as a caller meets it: ``apportion submit --wait`` through a
real worker and Redis, against ``apportion solve`` on the same job, in one run.

    .venv/bin/python bench/bench_big_job.py [--rounds 5] [--copies 5] [--before REV]
        [--scenario flat|same_subtree|both] [--profile DIR]

The job is bench/bench_placement.py's 1,000-host cloud (2 NUMA nodes a host, one
sharing disk): flat (4,000 candidates) and same_subtree (2,000). Per path the cost
of one job is (time(N) - time(1)) / (N - 1), N copies in a JSON array against one,
each a fresh ``python -m apportion.cli`` process (as bench/bench_launch_solve.py
does): reading, validating, solving, answering, writing, without the interpreter's
start-up and imports. ``submit --wait`` sends the array and waits for each answer in
order; the worker is ``apportion worker -Q launch -c 1`` as operators start it, on a
dedicated redis-server. Every answer is checked: ``ok`` with every candidate.

``--after REV`` measures commit REV instead of the working tree. ``--before REV``:
the same with the tree of commit REV (exported, its own worker on
another Redis db), rounds alternating between the trees, so both are measured under
the same load. Redis's CPU per job over the ``submit`` runs is read from /proc.

``--without direct,publisher,record``: one more worker per piece written over a
library internal, that piece replaced by the public API it stands in for
(bench/ablate_site/sitecustomize.py), measured in the same rounds.

``--profile DIR``: py-spy records the worker's main process and pool child while the
rounds run (speedscope files in DIR).

Figures are recorded in bench/worker.md.
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
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_placement import SIMPLE, SUBTREE, numa_cloud  # noqa: E402
from bench_worker import Node, _children, _cpu_seconds  # noqa: E402

from tests.support.processes import RedisServer, free_port  # noqa: E402

SCENARIOS: dict[str, tuple[str, int]] = {"flat": (SIMPLE, 4000), "same_subtree": (SUBTREE, 2000)}


@dataclass
class Tree:
    """A source tree, its worker and its Redis db."""

    name: str
    pythonpath: str | None
    db: int
    url: str = ""
    node: Node | None = None
    without: str = ""  # pieces replaced by the public API (bench/ablate_site)
    figures: dict[str, list[float]] = field(default_factory=dict)

    def env(self, url: str) -> dict[str, str]:
        env = {**os.environ, "APPORTION_REDIS_URL": url}
        if self.pythonpath is not None:
            env["PYTHONPATH"] = self.pythonpath
        if self.without:
            env["BENCH_WITHOUT"] = self.without
        return env


def export(rev: str, into: Path) -> str:
    """Commit ``rev`` of this repository as a tree importable through PYTHONPATH."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    for package in ("config", "workers", "tasks"):
        (into / "src" / "apportion" / package).symlink_to(into / package)
    return str(into / "src")


Parts = dict[str, float]  # wall and CPU seconds by process: wall, caller, main, pool, redis


def timed(argv: list[str], env: dict[str, str], out: Path, watch: Callable[[], Parts]) -> Parts:
    """Wall seconds of one command, and CPU seconds of it and of the processes watched."""
    before, usage = watch(), resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with out.open("wb") as sink:
        subprocess.run(argv, stdout=sink, env=env, cwd=ROOT, check=False)
    wall = time.perf_counter() - started
    after, used = watch(), resource.getrusage(resource.RUSAGE_CHILDREN)
    caller = used.ru_utime + used.ru_stime - usage.ru_utime - usage.ru_stime
    return {"wall": wall, "caller": caller, **{k: after[k] - before[k] for k in after}}


def check(out: Path, copies: int, candidates: int) -> None:
    answers = json.loads(out.read_bytes())
    answers = answers if isinstance(answers, list) else [answers]
    got = [(a["status"], len(a["result"]["allocation_requests"])) for a in answers]
    if len(got) != copies or any(g != ("ok", candidates) for g in got):
        raise SystemExit(f"{out}: expected {copies} x ok with {candidates} candidates, got {got}")


def per_job(
    tree: Tree, command: list[str], files: tuple[Path, Path], n: int, expect: int, watch: Any
) -> Parts:
    """What a job of ``command`` (``solve``/``submit --wait``) costs on ``tree``, in ms."""
    argv = [sys.executable, "-m", "apportion.cli", *command]
    out = Path(files[0].parent, f"out-{tree.name}.json")
    env = tree.env(tree.url)

    def given(path: Path) -> list[str]:
        return [str(path) if arg == "FILE" else arg for arg in argv]

    # The single job twice, the faster kept: a start-up slowed by the machine's load
    # would otherwise come off every job of the array.
    one = min((timed(given(files[1]), env, out, watch) for _ in range(2)), key=lambda p: p["wall"])
    check(out, 1, expect)
    many = timed(given(files[0]), env, out, watch)
    check(out, n, expect)
    return {k: (many[k] - one[k]) * 1000 / (n - 1) for k in many}


def one_round(tree: Tree, files: tuple[Path, Path], n: int, expect: int, redis_pid: int) -> None:
    assert tree.node is not None
    assert tree.node.proc is not None
    main = tree.node.proc.pid

    def nothing() -> Parts:
        return {}

    def worker_side() -> Parts:
        pool = sum(_cpu_seconds(pid) for pid in _children(main))
        return {"main": _cpu_seconds(main), "pool": pool, "redis": _cpu_seconds(redis_pid)}

    solve_argv = ["solve", "launch_select", "FILE", "--no-pretty"]
    solve = per_job(tree, solve_argv, files, n, expect, nothing)
    submit = ["submit", "launch_select", "FILE", "--wait", "--no-pretty"]
    worker = per_job(tree, submit, files, n, expect, worker_side)
    worker["cpu"] = sum(v for k, v in worker.items() if k != "wall")
    figures = {"solve": solve["wall"], "solve cpu": solve["caller"], "worker": worker["wall"]}
    figures |= {f"worker {k}": v for k, v in worker.items() if k != "wall"}
    figures["ratio"] = worker["wall"] / solve["wall"]
    figures["cpu ratio"] = worker["cpu"] / solve["caller"]
    for key, value in figures.items():
        tree.figures.setdefault(key, []).append(value)


def _median(values: list[float]) -> str:
    if len(values) < 3:
        return " / ".join(f"{v:.1f}" for v in values)
    q = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):.1f} ({q[0]:.1f}–{q[2]:.1f})"


def report(trees: list[Tree], scenario: str) -> None:
    for tree in trees:
        rounds = len(tree.figures["ratio"])
        print(f"{scenario} {tree.name}, ms a job, median (quartiles) of {rounds} rounds:")
        for key, values in tree.figures.items():
            print(f"  {key:14} {_median(values)}", flush=True)


def spy(pid: int, into: Path, stack: ExitStack) -> None:
    argv = [str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "-r", "200"]
    proc = subprocess.Popen(
        [*argv, "-f", "speedscope", "-o", str(into)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def stop() -> None:
        proc.send_signal(2)
        proc.wait(60)

    stack.callback(stop)


def run(args: argparse.Namespace, stack: ExitStack, workdir: Path) -> None:
    server = RedisServer(port=free_port(), workdir=workdir / "redis")
    server.start()
    stack.callback(server.stop)
    assert server.proc is not None
    after = export(args.after, workdir / "after") if args.after else None
    trees = [Tree("after", after, 0)]
    if args.before:
        trees.insert(0, Tree("before", export(args.before, workdir / "before"), 1))
    site = str(ROOT / "bench" / "ablate_site")
    for db, piece in enumerate(args.without.split(",") if args.without else [], start=2):
        path = site if after is None else f"{after}:{site}"
        trees.append(Tree(f"without-{piece}", path, db, without=piece))
    base = server.url.rsplit("/", 1)[0]
    for tree in trees:
        tree.url = f"{base}/{tree.db}"
        argv = [sys.executable, "-m", "apportion.cli", "worker", "-Q", "launch", "-c", "1"]
        argv += ["-n", f"{tree.name}@%h"]
        tree.node = Node(argv, tree.env(tree.url), workdir / f"worker-{tree.name}.log")
        tree.node.start()
        stack.callback(tree.node.stop)
        if args.profile:
            main = tree.node.proc.pid if tree.node.proc else 0
            spy(main, Path(args.profile, f"{tree.name}-main.json"), stack)
            for child in _children(main):
                spy(child, Path(args.profile, f"{tree.name}-child-{child}.json"), stack)
    for scenario in ["flat", "same_subtree"] if args.scenario == "both" else [args.scenario]:
        request, expect = SCENARIOS[scenario]
        job = {"providers": numa_cloud(1000), "request": request, "policy": None}
        files = (workdir / f"{scenario}-n.json", workdir / f"{scenario}-1.json")
        files[0].write_text(json.dumps([job] * args.copies))
        files[1].write_text(json.dumps(job))
        for tree in trees:
            tree.figures = {}
            one_round(tree, files, args.copies, expect, server.proc.pid)
            tree.figures = {}  # the first round warms the worker and the caches
        for r in range(args.rounds):
            for tree in trees if r % 2 == 0 else trees[::-1]:
                one_round(tree, files, args.copies, expect, server.proc.pid)
            print(
                f"round {r + 1}: "
                + "   ".join(
                    f"{t.name} solve {t.figures['solve'][-1]:.0f} ms worker "
                    f"{t.figures['worker'][-1]:.0f} ms ({t.figures['ratio'][-1]:.2f}x, CPU "
                    f"{t.figures['cpu ratio'][-1]:.2f}x)"
                    for t in trees
                )
                + f"   load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        report(trees, scenario)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--copies", type=int, default=5)
    parser.add_argument("--before", help="a commit to measure against, in alternating rounds")
    parser.add_argument("--after", help="a commit to measure instead of the working tree")
    parser.add_argument(
        "--without",
        help="pieces (comma-separated: direct, publisher, record) each measured replaced by "
        "the public API, as trees of their own (bench/ablate_site)",
    )
    parser.add_argument("--scenario", choices=["flat", "same_subtree", "both"], default="both")
    parser.add_argument("--profile", help="a directory for py-spy's records of the workers")
    args = parser.parse_args()
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="bench-big-") as tmp:
        run(args, stack, Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
