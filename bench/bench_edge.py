"""The edge every job pays before its engine (apportion.edge), stage by stage, in process.

Run: ``.venv/bin/python bench/bench_edge.py [--rounds 21] [--vs TREE/src]``

Jobs: bench_launch_solve.py's 1,000-host flat launch_select job (490 KB of JSON) and
bench_attach.py's 2,000-pool auto_attach job. Stages, CPU time of one call:

* ``decode``: JSON text to data, duplicate keys refused (``edge.loads``);
* ``shape``: the shape walk on the decoded data (``edge.shape_problem``), what a job
  that arrives as data (the worker, a Python caller) pays;
* ``edge``: what ``apportion solve`` pays: decode, then the shape walk unless the
  text vouches for the shape (``edge.load_bounded``; a tree without it: decode + walk).

``--vs TREE/src`` loads ``apportion/edge.py`` of another source tree (an exported
commit) beside this one and measures it in alternating calls, so both see the same
machine; the ratio is of the medians. Results: bench/placement.md, bench/attach.md.
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

from apportion import edge  # noqa: E402
from apportion.limits import Limits  # noqa: E402


def load_edge(src: str) -> ModuleType:
    """``apportion/edge.py`` of another tree as its own module (its imports are this tree's)."""
    spec = importlib.util.spec_from_file_location("other_edge", Path(src, "apportion/edge.py"))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["other_edge"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def stages(module: Any, text: str, limits: Limits) -> dict[str, Callable[[], Any]]:
    data = json.loads(text)

    def whole() -> Any:
        if hasattr(module, "load_bounded"):
            value, bounds = module.load_bounded(text, limits)
            if bounds is not None and bounds.vouch(limits):
                return value
        else:
            value = module.loads(text, limits)
        return module.shape_problem(value, limits)

    return {
        "decode": lambda: module.loads(text, limits),
        "shape": lambda: module.shape_problem(data, limits),
        "edge": whole,
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
    trees: dict[str, Any] = {"this": edge}
    if args.vs:
        trees["vs"] = load_edge(args.vs)
    jobs = {
        "launch_select 1,000 hosts flat": {
            "providers": numa_cloud(1000),
            "request": SIMPLE,
            "policy": None,
        },
        "auto_attach 2,000 pools": make_job(rules="candlepin-5.42"),
    }
    print(f"CPU ms per call, median (min) of {args.rounds}; load {os.getloadavg()[0]:.1f}")
    for job_name, job in jobs.items():
        text = json.dumps(job)
        calls = {tree: stages(module, text, limits) for tree, module in trees.items()}
        for stage in calls["this"]:
            times: dict[str, list[float]] = {tree: [] for tree in trees}
            for _ in range(args.rounds):
                for tree in trees:
                    times[tree].append(cpu_ms(calls[tree][stage]))
            line = f"{job_name} ({len(text) // 1000} KB), {stage:<6}"
            for tree, values in times.items():
                line += f"  {tree} {statistics.median(values):6.2f} ({min(values):6.2f})"
            if args.vs:
                ratio = statistics.median(times["vs"]) / statistics.median(times["this"])
                line += f"  {ratio:.1f}x"
            print(line, flush=True)


if __name__ == "__main__":
    main()
