"""Auto-attach benchmark: 20 installed products over 2,000 pools (200 stacks), in process.

Run: ``.venv/bin/python bench/bench_attach.py [--repeat N] [--rules R] [--profile]``
     ``.venv/bin/python bench/bench_attach.py --worst``          (the limits: 50,000 pools)
     ``.venv/bin/python bench/bench_attach.py --export job.json`` (the job, for other engines)

The job is generated from a fixed seed: a physical 8-socket consumer (4 cores per
socket, 32 GB, x86_64, a role, two addons, a service level) with 20 installed
products out of a catalogue of 100; 2,000 pools, of which 1,000 form 200 stacks of 5
and 1,000 are single pools. Pools provide 1–4 catalogue products (the pools of one
stack the same ones, as one product line) and vary in sockets,
cores, ram, instance_multiplier, arch (x86_64, ALL, x86, ppc64le), virt_only,
multi-entitlement, syspurpose values, quantities (some unlimited, some used up) and
dates (some expired or not yet valid). Two existing entitlements are attached (one
of them a partial stack), so compliance is computed from entitlements as well.

``--worst`` is the same generator at the job limits: 50,000 pools (5,000 stacks of 5),
10,000 installed products (``max_products``) out of a catalogue of 20,000.

Reported: the median and minimum wall time of the engine alone (``solve_auto_attach`` on
the parsed job) and of the whole ``apportion.engine.run`` call (what the Celery task
reports as ``elapsed_ms``: the payload shape check, pydantic validation, the kind's
check and the engine), the median CPU time of each, the stages of ``run`` measured one
by one, and the load average while measuring (the machine is shared; medians move with
it). The speed target is measured as a caller sees it, through ``apportion solve``:
bench/bench_attach_cli.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from apportion.attach import solve_auto_attach
from apportion.contracts.attach import AutoAttachJob
from apportion.contracts.attach_checks import check_auto_attach
from apportion.edge import shape_problem
from apportion.engine import Context, run

CATALOGUE = [f"prod-{i:03d}" for i in range(100)]
INSTALLED = CATALOGUE[:20]


def _pool(
    rng: random.Random,
    pool_id: str,
    stack: str | None,
    family: list[str] | None,
    catalogue: Sequence[str] = CATALOGUE,
) -> dict[str, Any]:
    pattrs: dict[str, str] = {}
    attrs: dict[str, str] = {}
    if stack is not None:
        pattrs["stacking_id"] = stack
        pattrs["multi-entitlement"] = "yes"
    elif rng.random() < 0.5:
        pattrs["multi-entitlement"] = "yes"
    size = rng.random()
    if size < 0.45:
        pattrs["sockets"] = rng.choice(["1", "2", "4", "8"])
    elif size < 0.7:
        pattrs["cores"] = rng.choice(["2", "4", "8", "16"])
    elif size < 0.8:
        pattrs["sockets"] = rng.choice(["2", "4"])
        pattrs["ram"] = rng.choice(["8", "16", "32"])
    if rng.random() < 0.1:
        pattrs["instance_multiplier"] = "2"
    arch = rng.random()
    if arch < 0.3:
        pattrs["arch"] = "x86_64"
    elif arch < 0.4:
        pattrs["arch"] = "ALL"
    elif arch < 0.45:
        pattrs["arch"] = "x86"
    elif arch < 0.5:
        pattrs["arch"] = "ppc64le"
    if rng.random() < 0.05:
        attrs["virt_only"] = "true"
    if rng.random() < 0.3:
        pattrs["roles"] = rng.choice(["RHEL Server", "RHEL Workstation", "Satellite"])
    if rng.random() < 0.2:
        pattrs["addons"] = rng.choice(["RHEL EUS", "RHEL ELS", "RHEL EUS,Smart Management"])
    if rng.random() < 0.5:
        pattrs["support_level"] = rng.choice(["Premium", "Standard", "Self-Support"])
    if rng.random() < 0.3:
        pattrs["usage"] = rng.choice(["Production", "Development"])
    quantity = -1 if rng.random() < 0.05 else rng.randint(1, 100)
    consumed = 0 if quantity < 0 else rng.randint(0, quantity) if rng.random() < 0.2 else 0
    start, end = "2025-01-01T00:00:00Z", f"20{rng.randint(27, 35)}-01-01T00:00:00Z"
    if rng.random() < 0.05:
        end = "2026-01-01T00:00:00Z"
    # Pools of one stack belong to one product line: they provide the same products.
    provided = family if family is not None else rng.sample(catalogue, rng.randint(1, 4))
    return {
        "id": pool_id,
        "product_id": f"sku-{pool_id}",
        "quantity": quantity,
        "consumed": consumed,
        "start_date": start,
        "end_date": end,
        "attributes": attrs,
        "product_attributes": pattrs,
        "provided_products": provided,
    }


def make_job(
    pools: int = 2_000,
    stacks: int = 200,
    per_stack: int = 5,
    seed: int = 42,
    rules: str = "seed",
    catalogue: Sequence[str] = CATALOGUE,
    installed: Sequence[str] = INSTALLED,
) -> dict[str, Any]:
    rng = random.Random(seed)
    pool_list: list[dict[str, Any]] = []
    stacked = stacks * per_stack
    order = [f"stack-{i % stacks:03d}" for i in range(stacked)] + [None] * (pools - stacked)
    rng.shuffle(order)
    families = {f"stack-{i:03d}": rng.sample(catalogue, rng.randint(1, 4)) for i in range(stacks)}
    for i, stack in enumerate(order):
        family = families[stack] if stack is not None else None
        pool_list.append(_pool(rng, f"pool-{i:04d}", stack, family, catalogue))
    partial = next(
        p
        for p in pool_list
        if p["product_attributes"].get("stacking_id")
        and p["product_attributes"].get("sockets") == "1"
    )
    single = next(p for p in pool_list if "stacking_id" not in p["product_attributes"])
    return {
        "job_id": "bench-attach",
        "consumer": {
            "uuid": "bench-consumer",
            "facts": {
                "cpu.cpu_socket(s)": "8",
                "cpu.core(s)_per_socket": "4",
                "memory.memtotal": str(32 * 1024 * 1024),
                "uname.machine": "x86_64",
                "virt.is_guest": "false",
            },
            "installed_products": list(installed),
            "role": "RHEL Server",
            "addons": ["RHEL EUS", "Smart Management"],
            "service_level": "Premium",
            "usage": "Production",
        },
        "pools": pool_list,
        "entitlements": [
            {"id": "ent-partial", "pool": partial, "quantity": 1},
            {"id": "ent-single", "pool": single, "quantity": 1},
        ],
        "at": "2026-06-01T00:00:00Z",
        "rules": rules,
    }


def worst_job() -> dict[str, Any]:
    """The same generator at the job limits (50,000 pools, 10,000 installed products)."""
    catalogue = [f"prod-{i:05d}" for i in range(20_000)]
    return make_job(pools=50_000, stacks=5_000, catalogue=catalogue, installed=catalogue[:10_000])


def _times(call: Callable[[], object], repeat: int) -> tuple[list[float], list[float]]:
    """Wall and CPU milliseconds of ``repeat`` calls."""
    wall, cpu = [], []
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.thread_time()
        call()
        cpu.append((time.thread_time() - started_cpu) * 1000)
        wall.append((time.perf_counter() - started) * 1000)
    return wall, cpu


def _line(name: str, wall: list[float], cpu: list[float]) -> str:
    return (
        f"  {name}: median {statistics.median(wall):.1f} ms, min {min(wall):.1f} ms, "
        f"max {max(wall):.1f} ms; CPU median {statistics.median(cpu):.1f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument(
        "--rules", default="seed", choices=["seed", "candlepin-5.42", "candlepin-5.44"]
    )
    parser.add_argument("--profile", action="store_true", help="print a pyinstrument profile")
    parser.add_argument("--worst", action="store_true", help="the job at the limits")
    parser.add_argument("--export", metavar="PATH", help="write the job as JSON and stop")
    args = parser.parse_args()

    payload = worst_job() if args.worst else make_job(rules=args.rules)
    payload["rules"] = args.rules
    if args.export:
        with open(args.export, "w") as f:
            json.dump(payload, f)
        return 0
    ctx = Context()
    first = run("auto_attach", payload, ctx)
    if first.status != "ok" or first.result is None:
        print(first.as_dict())
        return 1
    job = AutoAttachJob.model_validate(payload)
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0002)
        profiler.start()
        for _ in range(args.repeat):
            solve_auto_attach(job, ctx)
        profiler.stop()
        print(profiler.output_text(unicode=True, color=False))
        return 0
    repeat = min(args.repeat, 3) if args.worst else args.repeat
    load_before = os.getloadavg()[0]
    engine, engine_cpu, whole, whole_cpu = [], [], [], []
    for _ in range(repeat):  # interleaved, so both see the same load
        wall, cpu = _times(lambda: solve_auto_attach(job, ctx), 1)
        engine += wall
        engine_cpu += cpu
        wall, cpu = _times(lambda: run("auto_attach", payload, ctx), 1)
        whole += wall
        whole_cpu += cpu
    stages = {
        "shape check": lambda: shape_problem(payload, ctx.limits),
        "validation": lambda: AutoAttachJob.model_validate(payload),
        "check": lambda: check_auto_attach(job, ctx.limits),
        "engine": lambda: solve_auto_attach(job, ctx),
    }
    stage_ms = {
        name: statistics.median(_times(call, max(3, repeat // 5))[0])
        for name, call in stages.items()
    }
    load_after = os.getloadavg()[0]
    result = first.result
    groups = result["explanation"]["groups"]
    installed = payload["consumer"]["installed_products"]
    stacks = len({p["product_attributes"].get("stacking_id") for p in payload["pools"]} - {None})
    print(
        f"auto_attach ({args.rules}): {len(payload['pools'])} pools, {stacks} stacks, "
        f"{len(installed)} installed products on {platform.machine()}, "
        f"Python {platform.python_version()}, load average {load_before:.1f}→{load_after:.1f}"
    )
    print(
        f"  answer: {len(result['pool_quantities'])} pools attached, "
        f"{len(result['covered_products'])} covered / {len(result['uncovered_products'])} "
        f"uncovered, {len(groups)} groups validated, "
        f"{len(result['explanation']['dropped_pools'])} pools filtered"
    )
    print(_line(f"engine (solve_auto_attach), {repeat} runs", engine, engine_cpu))
    print(_line("engine.run (shape check, validation, check, engine)", whole, whole_cpu))
    print("  run stages (medians): " + ", ".join(f"{k} {v:.1f} ms" for k, v in stage_ms.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
