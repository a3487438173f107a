"""The walks every job pays before its engine (apportion.edge, apportion.unknown_fields,
the worker's gate), stage by stage, in process.

Run: ``.venv/bin/python bench/bench_edge.py [--rounds 21] [--vs TREE/src]``

Jobs: bench_launch_solve.py's 1,000-host flat launch_select job (490 KB of JSON) and
bench_attach.py's 2,000-pool auto_attach job. Stages, CPU time of one call:

* ``decode``: JSON text to data, duplicate keys refused (``edge.loads``);
* ``shape``: the shape walk on the decoded data (``edge.shape_problem``), what a job
  that arrives as data (the worker, a Python caller) pays;
* ``edge``: what ``apportion solve`` pays: decode, then the shape walk unless the
  text vouches for the shape (``edge.load_bounded``; a tree without it: decode + walk);
* ``unknown``: the unknown-field check of the decoded job (``unknown_fields.find``);
* ``gate``: the worker's gate's bounds of the decoded message (``gate._bounds``);
* ``route``: the fastest route of a job through all of it: ``edge``, then ``unknown``.

``--vs TREE/src`` loads ``apportion/edge_fast.py``, ``apportion/edge.py``,
``apportion/unknown_fields.py`` and ``workers/broker/gate.py`` of another source tree
(an exported commit) beside this one, their other imports this tree's, and measures
them in alternating calls (paired rounds), so both see the same machine; the ratio is
the median of the per-round ratios. Results: bench/placement.md, the edge row of bench/README.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_attach import make_job  # noqa: E402
from bench_placement import SIMPLE, numa_cloud  # noqa: E402

from apportion import edge, edge_fast, kinds, unknown_fields  # noqa: E402
from apportion.limits import Limits  # noqa: E402
from apportion.workers.broker import gate  # noqa: E402

# The modules measured, by their name and path in a source tree; each loaded from the
# other tree imports those loaded before it from that tree too (its edge, its edge_fast).
MODULES = {
    "edge_fast": "apportion/edge_fast.py",
    "edge": "apportion/edge.py",
    "unknown_fields": "apportion/unknown_fields.py",
    "gate": "../workers/broker/gate.py",
}


def load_tree(src: str) -> dict[str, ModuleType]:
    """The measured modules of another tree, each as its own module; their other imports
    are this tree's."""
    loaded: dict[str, ModuleType] = {}
    for name, path in MODULES.items():
        spec = importlib.util.spec_from_file_location(f"other_{name}", Path(src, path))
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[f"other_{name}"] = module  # dataclasses look their module up
        ours = {f"apportion.{n}": sys.modules[f"apportion.{n}"] for n in loaded}
        sys.modules.update({f"apportion.{n}": m for n, m in loaded.items()})
        try:
            spec.loader.exec_module(module)
        finally:
            sys.modules.update(ours)
        loaded[name] = module
    return loaded


def stages(
    tree: dict[str, ModuleType], kind: str, text: str, limits: Limits
) -> dict[str, Callable[[], Any]]:
    data = json.loads(text)
    module, unknown = tree["edge"], tree["unknown_fields"]
    model = kinds.get(kind).job
    call = [[data], {}, {}]

    def whole() -> Any:
        if hasattr(module, "load_bounded"):
            value, bounds = module.load_bounded(text, limits)
            if bounds is not None and bounds.vouch(limits):
                return value
        else:
            value = module.loads(text, limits)
        module.shape_problem(value, limits)
        return value

    return {
        "decode": lambda: module.loads(text, limits),
        "shape": lambda: module.shape_problem(data, limits),
        "edge": whole,
        "unknown": lambda: unknown.find(model, data),
        "gate": lambda: tree["gate"]._bounds(call, limits),
        "route": lambda: unknown.find(model, whole()),
    }


def cpu_ms(call: Callable[[], Any]) -> float:
    started = time.process_time()
    call()
    return (time.process_time() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--vs", help="another tree's src/ (its apportion/edge.py)")
    args = parser.parse_args()
    limits = Limits()
    trees: dict[str, dict[str, ModuleType]] = {
        "this": {
            "edge_fast": edge_fast,
            "edge": edge,
            "unknown_fields": unknown_fields,
            "gate": gate,
        }
    }
    if args.vs:
        trees["vs"] = load_tree(args.vs)
    jobs = {
        "launch_select 1,000 hosts flat": (
            "launch_select",
            {"providers": numa_cloud(1000), "request": SIMPLE, "policy": None},
        ),
        "auto_attach 2,000 pools": ("auto_attach", make_job(rules="candlepin-5.42")),
    }
    print(f"CPU ms per call, median (min) of {args.rounds}; load {os.getloadavg()[0]:.1f}")
    for job_name, (kind, job) in jobs.items():
        text = json.dumps(job)
        calls = {tree: stages(modules, kind, text, limits) for tree, modules in trees.items()}
        for stage in calls["this"]:
            times: dict[str, list[float]] = {tree: [] for tree in trees}
            for _ in range(args.rounds):
                for tree in trees:
                    times[tree].append(cpu_ms(calls[tree][stage]))
            line = f"{job_name} ({len(text) // 1000} KB), {stage:<7}"
            for tree, values in times.items():
                line += f"  {tree} {statistics.median(values):6.2f} ({min(values):6.2f})"
            if args.vs:
                pairs = zip(times["vs"], times["this"], strict=True)
                ratio = statistics.median(v / t for v, t in pairs if t > 0)
                line += f"  vs/this {ratio:.2f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
