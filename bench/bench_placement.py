"""Benchmarks of the allocation-candidates engine (issue 4; targets in bench/README.md).

Run: ``.venv/bin/python bench/bench_placement.py [--quick] [--profile NAME]``

Each scenario is timed four ways, median of several runs:

* ``engine``: ``apportion.launch.solve(job, ctx)`` on an already validated job with
  ``policy: null`` (forest, query, search, the result as plain dicts — everything
  but pydantic validation of the job and serialisation of the result);
* ``engine+policy``: the same without a ``policy`` key, so the default policy
  (config/default_policy.yaml, given as ``Context.default_policy``) selects;
* ``run()`` and ``run()+policy``: ``apportion.engine.run("launch_select", payload)``
  from a plain dict: validation of the job, the solver and the envelope — for the
  same two payloads.

The whole job as a caller sees it (reading and writing included, in a fresh
process) is bench_launch_solve.py's. Figures are recorded in bench/placement.md.
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from apportion.contracts import Envelope
from apportion.contracts.launch import LaunchSelectJob
from apportion.engine import Context, run
from apportion.engine_settings import load_default_policy
from apportion.launch import solve
from apportion.limits import DEFAULT_LIMITS, Limits

NOW = datetime(2026, 11, 22, 12, tzinfo=UTC)
SHARES = "MISC_SHARES_VIA_AGGREGATE"
SIMPLE = "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10"
SUBTREE = (
    "resources_DISK=DISK_GB:10&resources_COMPUTE=VCPU:1,MEMORY_MB:512"
    "&required_NUMA=HW_NUMA_ROOT&same_subtree=_NUMA,_COMPUTE"
)


def numa_cloud(hosts: int, storages: int = 1) -> list[dict[str, Any]]:
    """``hosts`` compute nodes, each with two NUMA children (VCPU, MEMORY_MB,
    HW_NUMA_ROOT), all in one aggregate with ``storages`` sharing DISK_GB providers."""
    providers: list[dict[str, Any]] = []
    for s in range(storages):
        providers.append(
            {
                "uuid": f"ss{s}",
                "inventories": {"DISK_GB": {"total": 100_000}},
                "traits": [SHARES],
                "aggregates": ["agg"],
            }
        )
    for h in range(hosts):
        providers.append({"uuid": f"cn{h}", "aggregates": ["agg"]})
        for n in range(2):
            providers.append(
                {
                    "uuid": f"cn{h}-numa{n}",
                    "parent_provider_uuid": f"cn{h}",
                    "inventories": {
                        "VCPU": {"total": 16, "allocation_ratio": 4.0},
                        "MEMORY_MB": {"total": 65_536},
                    },
                    "usages": {"VCPU": 4, "MEMORY_MB": 8_192},
                    "traits": ["HW_NUMA_ROOT"],
                }
            )
    return providers


def vgpu_host(children: int = 8) -> list[dict[str, Any]]:
    """One root with ``children`` single-unit VGPU providers."""
    return [{"uuid": "host"}] + [
        {"uuid": f"gpu{i}", "parent_provider_uuid": "host", "inventories": {"VGPU": {"total": 1}}}
        for i in range(children)
    ]


def isolated_vgpus(groups: int, limit: int | None = None) -> str:
    query = "&".join(f"resources_G{i}=VGPU:1" for i in range(groups)) + "&group_policy=isolate"
    return query + (f"&limit={limit}" if limit else "")


@dataclass
class Scenario:
    name: str
    # Built when measured, so that the process holds one job at a time: the
    # garbage collector's full passes scan every live object, and other
    # scenarios' data would inflate them.
    build: Callable[[], list[dict[str, Any]]]
    request: str
    target_ms: float | None
    limits: Limits = DEFAULT_LIMITS
    expect: int | None = None  # number of candidates


@dataclass(frozen=True)
class Timing:
    wall: float  # median wall-clock ms
    wall_min: float
    cpu: float  # median CPU ms of this process (steadier on a shared VM)

    def __str__(self) -> str:
        return f"{self.wall:.1f}/{self.wall_min:.1f}/{self.cpu:.1f}"


def timed(fn: Callable[[], object], repeat: int) -> Timing:
    fn()  # warm-up (imports, caches)
    walls, cpus = [], []
    for _ in range(repeat):
        # Start every run from a collected heap: garbage of the previous run must
        # not be charged to this one. The collector stays on while timing.
        gc.collect()
        start, start_cpu = time.perf_counter(), time.process_time()
        answer = fn()
        walls.append((time.perf_counter() - start) * 1000.0)
        cpus.append((time.process_time() - start_cpu) * 1000.0)
        del answer  # freeing the answer is the caller's business, not timed
    return Timing(statistics.median(walls), min(walls), statistics.median(cpus))


def measure(s: Scenario, repeat: int) -> dict[str, Any]:
    providers = s.build()
    plain = {"providers": providers, "request": s.request, "policy": None}
    # No `policy` key: the job gets the default policy of the context.
    selected = {"providers": providers, "request": s.request, "seed": 7}
    job = LaunchSelectJob.model_validate(plain)
    job_policy = LaunchSelectJob.model_validate(selected)
    ctx = Context(limits=s.limits, now=NOW, default_policy=load_default_policy())
    result = solve(job, ctx)
    n = len(result["allocation_requests"])
    if s.expect is not None and n != s.expect:
        raise SystemExit(f"{s.name}: expected {s.expect} candidates, got {n}")
    if solve(job_policy, ctx)["selection"] is None:
        raise SystemExit(f"{s.name}: the default policy did not select")
    del result

    def whole(payload: dict[str, Any]) -> Callable[[], Envelope]:
        def go() -> Envelope:
            env = run("launch_select", payload, ctx)
            if env.status != "ok":
                raise SystemExit(f"{s.name}: {env.status} {env.error}")
            return env

        return go

    return {
        "name": s.name,
        "providers": len(providers),
        "candidates": n,
        "engine": timed(lambda: solve(job, ctx), repeat),
        "engine_policy": timed(lambda: solve(job_policy, ctx), repeat),
        "run": timed(whole(plain), repeat),
        "run_policy": timed(whole(selected), repeat),
        "target": s.target_ms,
    }


def scenarios(quick: bool) -> list[Scenario]:
    big_cap = Limits(max_candidates=100_000)
    one_disk = partial(numa_cloud, 1000)
    ten_disks = partial(numa_cloud, 1000, 10)
    out = [
        Scenario("1000 hosts x 2 NUMA, 1 sharing disk: simple", one_disk, SIMPLE, 70, expect=4000),
        Scenario(
            "1000 hosts x 2 NUMA, 1 sharing disk: same_subtree", one_disk, SUBTREE, 70, expect=2000
        ),
        Scenario(
            "1000 hosts x 2 NUMA, 10 sharing disks: simple (cap 10,000)",
            ten_disks,
            SIMPLE,
            100,
            expect=10_000,
        ),
        Scenario(
            "1000 hosts x 2 NUMA, 10 sharing disks: same_subtree (cap 10,000)",
            ten_disks,
            SUBTREE,
            200,
            expect=10_000,
        ),
        Scenario(
            "8 VGPUs, 6 isolated groups (cap raised)",
            vgpu_host,
            isolated_vgpus(6),
            1000,
            big_cap,
            20_160,
        ),
        Scenario(
            "8 VGPUs, 8 isolated groups, limit 1000",
            vgpu_host,
            isolated_vgpus(8, 1000),
            100,
            expect=1000,
        ),
    ]
    if not quick:
        for hosts in (250, 500, 1000, 2000, 4000):
            out.append(
                Scenario(
                    f"scaling: {hosts} hosts, 10 sharing disks, same_subtree, limit 10",
                    partial(numa_cloud, hosts, 10),
                    SUBTREE + "&limit=10",
                    None,
                    expect=10,
                )
            )
        for hosts in (250, 500, 1000, 2000, 4000):
            out.append(
                Scenario(
                    f"scaling: {hosts} hosts, 10 sharing disks, simple, limit 1000",
                    partial(numa_cloud, hosts, 10),
                    SIMPLE + "&limit=1000",
                    None,
                    expect=1000,
                )
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="skip the scaling series")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--only", help="run only the scenarios whose name contains this")
    parser.add_argument("--profile", help="profile run() on the scenario whose name contains this")
    parser.add_argument(
        "--policy", action="store_true", help="with --profile: omit `policy` (default policy)"
    )
    args = parser.parse_args()
    chosen = scenarios(args.quick)
    if args.only:
        chosen = [s for s in chosen if args.only in s.name]
    if args.profile:
        from pyinstrument import Profiler  # type: ignore[import-not-found, unused-ignore]

        s = next(x for x in chosen if args.profile in x.name)
        payload: dict[str, Any] = {"providers": s.build(), "request": s.request, "seed": 7}
        if not args.policy:
            payload["policy"] = None
        ctx = Context(limits=s.limits, now=NOW, default_policy=load_default_policy())
        run("launch_select", payload, ctx)
        with Profiler(interval=0.0005) as profiler:
            for _ in range(5):
                run("launch_select", payload, ctx)
        profiler.print()
        return
    print(f"python {platform.python_version()} on {platform.machine()}")
    print(
        "ms as median wall / min wall / median CPU of this process;"
        " the target applies to the engine's wall median"
    )
    print(
        f"{'scenario':<66} {'providers':>9} {'cands':>6} {'engine':>19} "
        f"{'+policy':>19} {'run()':>19} {'run()+policy':>19} {'target':>6}"
    )
    failed = False
    for s in chosen:
        gc.collect()
        r = measure(s, args.repeat)
        target = "" if r["target"] is None else f"{r['target']:.0f}"
        ok = r["target"] is None or r["engine"].wall <= r["target"]
        failed |= not ok
        print(
            f"{r['name']:<66} {r['providers']:>9} {r['candidates']:>6} "
            f"{r['engine']!s:>19} {r['engine_policy']!s:>19} "
            f"{r['run']!s:>19} {r['run_policy']!s:>19} {target:>6}"
            f"{'' if ok else '  OVER'}",
            flush=True,
        )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
