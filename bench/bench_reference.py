"""The references and apportion on the same jobs, alternating in one run (issue 17's table).

Run (each reference checkout and interpreter is a command-line path; nothing of them is
in this repository — bench/reference.md says how to set them up)::

    .venv/bin/python bench/bench_reference.py \\
        --placement PLACEMENT_CHECKOUT --placement-python PLACEMENT_VENV/bin/python \\
        --candlepin CANDLEPIN_CLONE \\
        --bareon BAREON_CHECKOUT --bareon-python BAREON_VENV/bin/python \\
        [--rounds 5] [--only TEXT] [--vs OTHER_TREE/src] [--collector paused|on|both]

A reference is needed only for the scenarios kept by ``--only``. ``--vs`` measures
another source tree's ``apportion solve`` in the same rounds (launch_select);
``--collector on`` runs ``solve`` with the cyclic collector left running, as a worker's
pool child runs a job (``both``: each way in each round).

Each reference runs in a long-lived process of its own, loaded once, and is asked for
one round at a time, so that each round of a scenario is a reference round followed at
once by apportion's round under the same machine load:

* Placement (``placement_oracle.py --serve``): the job's providers created through
  Placement's REST API in-process on sqlite (``placement.direct``), then per round K
  calls of ``GET /allocation_candidates`` at the latest microversion, the JSON body the
  WSGI app returns included;
* Candlepin (``attach_oracle.js --serve`` under Node): rules.js ``select_pools`` warm
  (5 untimed calls first), K calls per round, the JSON parse of its context included;
* Bareon (``partition_oracle.py --serve``): its allocator with one shared yaql engine,
  K runs per round.

apportion's round is the whole job as a caller sees it: ``apportion solve`` on a file of
N copies minus the same on one copy, per job (reading, validation, engine, envelope,
writing), measured by bench_launch_solve.py's, bench_attach_cli.py's and
bench_partition.py's own code. Both sides report wall and CPU time; a reference round's
figure is the median of its K calls, a scenario's figure the median of its rounds, and
its ratio the median of the rounds' reference / apportion ratios (CPU decides ≥ 10×).

Before timing, each scenario's answers are compared (a ratio against a different answer
means nothing): Placement's candidates mapped back to the job's names against those
``apportion solve`` wrote; rules.js's pool → quantity map against apportion's; Bareon's
sizes through partition_differential's classification.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import bench_launch_solve  # noqa: E402
from bench_placement import SIMPLE, SUBTREE, isolated_vgpus, numa_cloud, vgpu_host  # noqa: E402

from apportion.engine import Context, run, validate  # noqa: E402
from apportion.limits import Limits  # noqa: E402
from bench import bench_attach_cli, bench_partition  # noqa: E402
from bench.attach_differential import candlepin_request, rules_file  # noqa: E402
from bench.bench_attach import make_job as attach_job  # noqa: E402
from bench.placement_oracle import canon  # noqa: E402

RULES = "candlepin-5.42"
TARGET_RATIO = 10.0


class Server:
    """A reference in a process of its own: one JSON line in, one JSON line out."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self.command = command
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )

    def send(self, row: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(row) + "\n")
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"reference ended without answering: {' '.join(self.command)}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer and answer.get("status") != "error":
            raise SystemExit(f"reference failed: {answer['error'][:500]}")
        return answer

    def ask(self, row: dict[str, Any]) -> dict[str, Any]:
        self.send(row)
        return self.read()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@dataclass
class Scenario:
    name: str
    target_ms: float
    reference: str  # who, as the issue names it, with the figure
    kind: str  # apportion's job kind
    job: dict[str, Any]
    # Copies in apportion's N-copy file: enough that N − 1 jobs outweigh the jitter of
    # two process start-ups (a few copies more than bench_launch_solve.py's for the
    # smaller launch jobs).
    copies: int
    calls: int  # reference calls per round
    order: dict[str, Any] = field(default_factory=dict)  # the round's request to its server
    server: Server | None = None
    check: str = ""
    # side (which tree, which collector mode) -> its rounds: (reference, apportion) ms
    rounds: dict[str, list[tuple[tuple[float, float], tuple[float, float]]]] = field(
        default_factory=dict
    )


# ---- the jobs --------------------------------------------------------------------------


def launch_job(providers: list[dict[str, Any]], request: str) -> dict[str, Any]:
    return {"providers": providers, "request": request, "policy": None}


def placement_spec(job: dict[str, Any], queries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A ``placement_oracle.py --serve`` input: the job's providers as the engine reads
    them (defaults filled in, which the loader needs) and the named queries."""
    providers = [dict(p) for p in validate("launch_select", job).providers]  # type: ignore[attr-defined]
    return {"providers": providers, "queries": queries}


def bareon_job(job: dict[str, Any]) -> dict[str, Any]:
    """The partition job in Bareon's spelling: ``partitions`` for ``partition``, and a
    literal list of disk ids in ``best_with_disks`` as the disks a yaql selection would
    give there (Bareon takes the ``id`` of each), so no expression is added."""
    out = copy.deepcopy(job)
    for space in out["schema"]:
        if space["type"] == "partition":
            space["type"] = "partitions"
        chosen = space.get("best_with_disks")
        if isinstance(chosen, list):
            space["best_with_disks"] = [{"id": d} for d in chosen]
    return out


def scenarios(args: argparse.Namespace, tmp: Path) -> list[Scenario]:
    numa = numa_cloud(1000)
    flat, subtree = launch_job(numa, SIMPLE), launch_job(numa, SUBTREE)
    six, eight = (
        launch_job(vgpu_host(), isolated_vgpus(6)),
        launch_job(vgpu_host(), isolated_vgpus(8, 1000)),
    )
    out = [
        Scenario(
            "1,000 hosts x 2 NUMA + sharing disk, flat (4,000 candidates)",
            28,
            "Placement 280 ms",
            "launch_select",
            flat,
            11,
            5,
            {"query": "flat"},
        ),
        Scenario(
            "same, same_subtree (2,000 candidates)",
            22,
            "Placement 218 ms",
            "launch_select",
            subtree,
            11,
            5,
            {"query": "subtree"},
        ),
        Scenario(
            "1 root, 8 VGPU children, 6 isolated groups, both capped at 10,000",
            700,
            "Placement 6.96 s",
            "launch_select",
            six,
            5,
            1,
            {"query": "six"},
        ),
        Scenario(
            "same, 8 groups, limit 1,000 (Placement: wide-tree workaround)",
            60,
            "Placement 1.8 s",
            "launch_select",
            eight,
            41,
            3,
            {"query": "eight"},
        ),
        Scenario(
            "auto_attach, 2,000 pools / 200 stacks / 20 products",
            20,
            "rules.js 193 ms",
            "auto_attach",
            attach_job(rules=RULES),
            21,
            11,
        ),
        Scenario(
            "partition, 24 disks x 40 spaces",
            15,
            "Bareon 62 ms",
            "partition",
            bench_partition.make_job(),
            51,
            11,
        ),
    ]
    if args.only:
        out = [s for s in out if args.only in s.name]
    kinds = {s.order.get("query") or s.kind for s in out}
    placement = [args.placement_python, str(HERE / "placement_oracle.py"), "--serve"]
    penv = {"PYTHONPATH": args.placement}
    servers: dict[str, Server] = {}
    if kinds & {"flat", "subtree"}:
        spec = placement_spec(
            flat,
            {
                "flat": {"request": SIMPLE, "config": {}},
                "subtree": {"request": SUBTREE, "config": {}},
            },
        )
        path = tmp / "numa.json"
        path.write_text(json.dumps(spec))
        servers["numa"] = Server([*placement, str(path)], penv)
    if kinds & {"six", "eight"}:
        spec = placement_spec(
            six,
            {
                # Both capped at 10,000: apportion's default max_candidates, and
                # Placement's own cap on the candidates it generates.
                "six": {
                    "request": six["request"],
                    "config": {"placement": {"max_allocation_candidates": 10_000}},
                },
                # Placement's wide-tree workaround as its documentation gives it: the
                # optimisation on, and the cap it asks for with it (at most 1,000).
                "eight": {
                    "request": eight["request"],
                    "config": {
                        "placement": {"max_allocation_candidates": 1_000},
                        "workarounds": {"optimize_for_wide_provider_trees": True},
                    },
                },
            },
        )
        path = tmp / "vgpu.json"
        path.write_text(json.dumps(spec))
        servers["vgpu"] = Server([*placement, str(path)], penv)
    _assign_servers(out, servers, args, tmp)
    for name, server in servers.items():
        ready = server.read()
        print(f"Placement loaded the {name} providers in {ready['load_s']:.1f} s", flush=True)
    return out


def _assign_servers(
    out: list[Scenario], servers: dict[str, Server], args: argparse.Namespace, tmp: Path
) -> None:
    """Each scenario's reference: the Placement server of its providers, or a rules.js or
    Bareon server of its own (started here, its job sent at once)."""
    for s in out:
        query = s.order.get("query")
        if query in ("flat", "subtree"):
            s.server = servers["numa"]
        elif query in ("six", "eight"):
            s.server = servers["vgpu"]
        elif s.kind == "auto_attach":
            if not args.candlepin:
                raise SystemExit("auto_attach needs --candlepin (or --only another scenario)")
            rules = rules_file(args.candlepin, RULES, str(tmp))
            if rules is None:
                raise SystemExit("no rules.js")
            s.server = Server(["node", str(HERE / "attach_oracle.js"), rules, "--serve"])
            s.server.send(candlepin_request(s.job))
        else:
            if not (args.bareon and args.bareon_python):
                raise SystemExit("partition needs --bareon and --bareon-python")
            s.server = Server(
                [args.bareon_python, str(HERE / "partition_oracle.py"), args.bareon, "--serve"]
            )
            s.server.send(bareon_job(s.job))


# ---- apportion's side ------------------------------------------------------------------


def files_for(s: Scenario, folder: Path) -> tuple[Path, Path]:
    folder.mkdir()
    many, one = folder / "many.json", folder / "one.json"
    if s.kind == "partition":  # as bench_partition.py writes them
        copies = [{**s.job, "job_id": f"copy-{i}"} for i in range(s.copies)]
    else:
        copies = [s.job] * s.copies
    many.write_text(json.dumps(copies))
    one.write_text(json.dumps([s.job]))
    return many, one


@dataclass(frozen=True)
class Side:
    """One apportion measured in each round: a source tree (None: this one) and, for
    launch_select, the collector's mode in ``apportion solve``."""

    label: str
    src: str | None = None
    collector: str = "paused"


def sides(args: argparse.Namespace, s: Scenario) -> list[Side]:
    if s.kind != "launch_select":
        return [Side("this")]
    modes = ["paused", "on"] if args.collector == "both" else [args.collector]
    trees: list[tuple[str, str | None]] = [("this", None)]
    if args.vs:
        trees.append(("before", args.vs))
    return [
        Side(label if mode == "paused" else f"{label}, collector on", src, mode)
        for mode in modes
        for label, src in trees
    ]


def apportion_round(s: Scenario, many: Path, one: Path, side: Side) -> tuple[float, float]:
    """ms per job (wall, CPU), each kind through its own benchmark's code."""
    if s.kind == "launch_select":
        return bench_launch_solve.per_job(side.src, (many, one), s.copies, side.collector)
    if s.kind == "auto_attach":
        return bench_attach_cli.per_job(one, many, s.copies, os.environ)
    return bench_partition.per_job(None, one, many, s.copies)


def apportion_answer(s: Scenario, one: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "apportion.cli", "solve", s.kind, str(one)],
        check=True,
        capture_output=True,
        cwd=one.parent,
    )
    envelope: dict[str, Any] = json.loads(done.stdout)[0]
    if envelope["status"] != "ok":
        raise SystemExit(f"{s.name}: apportion answered {envelope['status']}: {envelope['error']}")
    result: dict[str, Any] = envelope["result"]
    return result


# ---- the same answer? ------------------------------------------------------------------


def check(s: Scenario, one: Path) -> str:
    ours = apportion_answer(s, one)
    assert s.server is not None
    if s.kind == "launch_select":
        theirs = s.server.ask({**s.order, "calls": 1, "answer": True})
        mine = sorted(canon(r["allocations"], r["mappings"]) for r in ours["allocation_requests"])
        return _launch_verdict(s, mine, theirs["candidates"])
    if s.kind == "auto_attach":
        theirs = s.server.read()
        same = ours["pool_quantities"] == theirs["pools"]
        note = f" ({theirs['note']})" if "note" in theirs else ""
        return (
            f"{'same' if same else 'DIFFERENT'} answer: apportion {len(ours['pool_quantities'])} "
            f"pools, rules.js {len(theirs['pools'])}{note}"
        )
    return _partition_verdict(s)


def _launch_verdict(s: Scenario, mine: list[str], theirs: list[str]) -> str:
    counts = f"apportion {len(mine):,}, Placement {len(theirs):,} candidates"
    if mine == theirs:
        return f"same candidates ({counts})"
    # A capped or limited answer is a subset of the complete one chosen by each side's
    # own order: equal counts, and both inside the complete answer.
    complete = _complete(s.job)
    inside = set(mine) <= complete and set(theirs) <= complete
    shared = len(set(mine) & set(theirs))
    verdict = "same count" if len(mine) == len(theirs) else "DIFFERENT count"
    return (
        f"{verdict} ({counts}; both {'inside' if inside else 'NOT inside'} the complete "
        f"answer of {len(complete):,}; {shared:,} in common)"
    )


def _complete(job: dict[str, Any]) -> set[str]:
    request = "&".join(p for p in job["request"].split("&") if not p.startswith("limit="))
    envelope = run(
        "launch_select",
        {**job, "request": request},
        Context(limits=Limits(max_candidates=1_000_000, max_envelope_bytes=1 << 30)),
    ).as_dict()
    return {
        canon(r["allocations"], r["mappings"]) for r in envelope["result"]["allocation_requests"]
    }


def _partition_verdict(s: Scenario) -> str:
    import numpy as np

    from apportion.partition import lp
    from bench.partition_differential import classify, job_problem

    assert s.server is not None
    theirs = s.server.read()
    if theirs.get("status") != "ok":
        return f"Bareon failed: {theirs.get('error')}"
    verdict = classify(s.job, theirs)
    problem = job_problem(s.job)
    relaxed = lp.solve(problem)
    assert relaxed is not None
    their_value = float(problem.objective @ np.array([v for row in theirs["raw"] for v in row]))
    gap = (relaxed.objective - their_value) / abs(relaxed.objective)
    return (
        f"{verdict}; the objective of Bareon's LP answer {their_value:.4f}, of apportion's "
        f"LP answer {relaxed.objective:.4f} (relative gap {gap:.1e})"
    )


# ---- the run ---------------------------------------------------------------------------


def reference_round(s: Scenario) -> tuple[float, float]:
    """ms (wall, CPU): the median of the round's K calls."""
    assert s.server is not None
    answer = s.server.ask({**s.order, "calls": s.calls})
    return statistics.median(answer["wall_s"]) * 1000, statistics.median(answer["cpu_s"]) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--placement", required=True, help="openstack/placement checkout")
    parser.add_argument("--placement-python", required=True, help="interpreter with its deps")
    parser.add_argument("--candlepin", help="candlepin/candlepin clone (auto_attach)")
    parser.add_argument("--bareon", help="openstack/bareon-allocator checkout (partition)")
    parser.add_argument("--bareon-python", help="interpreter with its deps (partition)")
    parser.add_argument(
        "--vs",
        help="PYTHONPATH of another source tree: its apportion measured in each round too "
        "(launch_select scenarios)",
    )
    parser.add_argument(
        "--collector",
        choices=["paused", "on", "both"],
        default="paused",
        help="launch_select: apportion solve with the cyclic collector paused (the CLI's "
        "way), left on (a worker's), or both in each round",
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", help="only the scenarios whose name contains this")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"load average at start {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        todo = scenarios(args, tmp)
        files = {s.name: files_for(s, tmp / str(i)) for i, s in enumerate(todo)}
        for s in todo:
            s.check = check(s, files[s.name][1])
            print(f"{s.name}: {s.check}", flush=True)
        loads = [os.getloadavg()[0]]
        for r in range(args.rounds):
            for s in todo:
                for side in sides(args, s):
                    # Each side right after a reference round of its own: the pair
                    # shares the machine's load.
                    ref = reference_round(s)
                    ours = apportion_round(s, *files[s.name], side)
                    s.rounds.setdefault(side.label, []).append((ref, ours))
                    print(
                        f"round {r + 1} {s.name} [{side.label}]: reference {_pair(ref)}, "
                        f"apportion {_pair(ours)}",
                        flush=True,
                    )
            loads.append(os.getloadavg()[0])
        for server in {id(s.server): s.server for s in todo if s.server}.values():
            server.close()
    report(todo, args.rounds, loads, time.perf_counter() - started)
    return 0


def _pair(ms: tuple[float, float]) -> str:
    return f"{ms[0]:.1f} wall / {ms[1]:.1f} CPU ms"


def _median(rows: list[tuple[float, float]], i: int) -> float:
    return statistics.median(r[i] for r in rows)


Rounds = list[tuple[tuple[float, float], tuple[float, float]]]


def _ratios(rounds: Rounds, i: int) -> list[float]:
    return [ref[i] / ours[i] for ref, ours in rounds if ours[i] > 0]


def report(todo: list[Scenario], rounds: int, loads: list[float], seconds: float) -> None:
    print(
        f"\n{rounds} rounds, load average {min(loads):.1f}-{max(loads):.1f}, "
        f"{seconds / 60:.1f} min; ms per job, median of the rounds (wall / CPU); "
        "ratio = reference / apportion, median of the rounds' ratios"
    )
    print(
        "\n| scenario | apportion | reference (issue's figure) | reference median "
        "| apportion median | ratio CPU (wall) | target | >= 10x (CPU) |"
    )
    print("|---|---|---|---:|---:|---:|---:|---|")
    verdict: Callable[[float], str] = lambda x: "yes" if x >= TARGET_RATIO else "**no**"  # noqa: E731
    for s in todo:
        for label, rows in s.rounds.items():
            refs = [r for r, _ in rows]
            ours = [o for _, o in rows]
            cpu = statistics.median(_ratios(rows, 1)) if _ratios(rows, 1) else float("nan")
            wall = statistics.median(_ratios(rows, 0)) if _ratios(rows, 0) else float("nan")
            print(
                f"| {s.name} | {label} | {s.reference} "
                f"| {_median(refs, 0):.1f} / {_median(refs, 1):.1f} "
                f"| {_median(ours, 0):.1f} / {_median(ours, 1):.1f} | {cpu:.1f}x ({wall:.1f}x) "
                f"| <= {s.target_ms:g} ms | {verdict(cpu)} |"
            )
    print("\nSame answer:")
    for s in todo:
        print(f"- {s.name}: {s.check}")
    print("\nRounds (reference wall / CPU ms; apportion wall / CPU ms per job):")
    for s in todo:
        for label, rows in s.rounds.items():
            pairs = "; ".join(f"{r[0]:.0f}/{r[1]:.0f} vs {o[0]:.1f}/{o[1]:.1f}" for r, o in rows)
            print(f"- {s.name} [{label}]: {pairs}")


if __name__ == "__main__":
    sys.exit(main())
