"""Differential test: the partition engine against Bareon's allocator on generated jobs.

    .venv/bin/python bench/partition_differential.py --bareon CHECKOUT --python ORACLE_PY \\
        [--jobs 1000] [--seed 1] [--show 3]

CHECKOUT is a checkout of openstack/bareon-allocator; ORACLE_PY an interpreter with
its dependencies (see bench/partition_oracle.py, which runs it). Jobs: 1–4 disks (hdd
or ssd, 50 MiB to 1 TB), 1–7 lvs (in a vg) and partitions with min/max/size (some from
yaql on the RAM), weights and ``best_with_disks`` selections (some selecting nothing).

Each job is classified:

* agree — both infeasible; the same whole MiB as upstream's LP values rounded; or
  within the integer step (upstream floors fractional values, this engine keeps exact
  fair shares in whole MiB: no value further from upstream's LP value than the step of
  its group, the sum of the group's integer weights);
* documented — a decision in docs and docstrings where the engine deliberately
  differs: equal fixed sizes with different weights (infeasible upstream), or a
  fair-share group upstream's Python 2 sort split;
* tie — the engine's LP reaches upstream's objective value at another vertex: both
  answers are optimal for the reference's own objective;
* differ — anything else (a regression to look at).
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from apportion.contracts.partition import PartitionJob
from apportion.contracts.partition_checks import check_partition
from apportion.engine import Context, run
from apportion.partition import dynamic, lp, model, schema

ORACLE = Path(__file__).with_name("partition_oracle.py")
SELECTIONS = [f'yaql=$.disks.where($.type = "{t}")' for t in ("ssd", "hdd", "nvme")] + [
    "yaql=$.disks.where($.size > 120)"
]
SIZES = [10, 20, 30, 50, 80, 100]


def _space(rng: random.Random, i: int) -> dict[str, Any]:
    space: dict[str, Any] = {"id": f"s{i}", "type": rng.choice(["partitions", "lv"])}
    form = rng.choice(["free", "min", "max", "range", "size", "yaql"])
    if form == "min":
        space["min_size"] = rng.choice(SIZES)
    elif form == "max":
        space["max_size"] = rng.choice(SIZES)
    elif form == "range":
        low = rng.choice(SIZES)
        space.update(min_size=low, max_size=low + rng.choice(SIZES))
    elif form == "size":
        space["size"] = rng.choice(SIZES)
    elif form == "yaql":
        space[rng.choice(["size", "min_size", "max_size"])] = "yaql=$.get(ram, 1024) / 64"
    weight = rng.choice([None, None, 1, 2, 3, 0.5])
    if weight is not None:
        space["weight"] = weight
    selection = rng.choice([None, None, None, *SELECTIONS])
    if selection is not None:
        space["best_with_disks"] = selection
    return space


def generate(rng: random.Random) -> dict[str, Any]:
    disks = [
        {
            "id": f"sd{chr(97 + i)}",
            "size": rng.choice([50, 100, 150, 200, 333, 1000]),
            "type": rng.choice(["hdd", "hdd", "ssd"]),
        }
        for i in range(rng.randint(1, 4))
    ]
    hardware: dict[str, Any] = {"disks": disks}
    if rng.random() < 0.7:
        hardware["ram"] = rng.choice([512, 1024, 2048, 4096])
    spaces = [_space(rng, i) for i in range(rng.randint(1, 7))]
    lvs = [{"id": s["id"]} for s in spaces if s["type"] == "lv"]
    if lvs:
        spaces.insert(rng.randint(0, len(spaces)), {"id": "vg1", "type": "vg", "contains": lvs})
    return {"schema": spaces, "hardware": hardware}


def job_problem(job: dict[str, Any]) -> model.Problem:
    limits = Context().limits
    parsed = schema.parse(check_partition(PartitionJob.model_validate(job), limits))
    return model.build(parsed.disks, dynamic.resolve(parsed, limits).spaces)


def _ours(job: dict[str, Any]) -> tuple[str, Any]:
    envelope = run("partition", json.loads(json.dumps(job)), Context()).as_dict()
    if envelope["status"] != "ok":
        return envelope["status"], envelope["error"]["message"]
    return "ok", [[s["size"] for s in d["spaces"]] for d in envelope["result"]["disks"]]


def _fixed_pair_with_different_weights(job: dict[str, Any]) -> bool:
    seen: dict[Any, Any] = {}
    for space in job_problem(job).spaces:
        if space.fixed and space.weight != 0:
            key = (space.min_size, space.best_with_disks)
            if seen.setdefault(key, space.weight) != space.weight:
                return True
    return False


def _split_by_sort(theirs: dict[str, Any]) -> bool:
    def norm(groups: list[list[str]]) -> list[tuple[str, ...]]:
        return sorted(tuple(sorted(g)) for g in groups)

    return norm(theirs["groups"]) != norm(theirs["key_groups"])


def _lp_tie(job: dict[str, Any], theirs: dict[str, Any]) -> bool:
    problem = job_problem(job)
    relaxed = lp.solve(problem)
    their_x = np.array([v for row in theirs["raw"] for v in row])
    if relaxed is None or their_x.shape != relaxed.x.shape:
        return False
    value = float(problem.objective @ their_x)
    same_value = abs(value - relaxed.objective) <= 1e-9 * max(1.0, abs(value))
    return same_value and not np.allclose(their_x, relaxed.x, atol=1e-6)


def _sizes_verdict(job: dict[str, Any], ours: Any, theirs: dict[str, Any]) -> str:
    pairs = [
        (a, b)
        for ro, rt in zip(ours, theirs["raw"], strict=True)
        for a, b in zip(ro, rt, strict=True)
    ]
    if all(a == round(b) for a, b in pairs):
        return "agree: exactly"
    step = max([1] + [sum(g.weights) for g in job_problem(job).groups])
    if max(abs(a - b) for a, b in pairs) <= step + 1e-6:
        return "agree: within the integer step (whole MiB, exact shares)"
    if _split_by_sort(theirs):
        return "documented: upstream's Python 2 sort split a fair-share group"
    if _lp_tie(job, theirs):
        return "tie: another optimum of the same LP"
    return "differ: sizes"


def classify(job: dict[str, Any], theirs: dict[str, Any]) -> str:
    status, ours = _ours(job)
    if theirs["status"] == "error" and "NoSolutionFound" in theirs["error"]:
        if status == "infeasible":
            return "agree: both infeasible"
        if _fixed_pair_with_different_weights(job):
            return "documented: equal fixed sizes with different weights (infeasible upstream)"
        return f"differ: infeasible upstream, {status} here"
    if theirs["status"] == "error":
        return f"upstream error ({theirs['error'][:40]}), {status} here"
    if status != "ok":
        return f"differ: ok upstream, {status} here"
    return _sizes_verdict(job, ours, theirs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bareon", required=True, help="openstack/bareon-allocator checkout")
    parser.add_argument("--python", required=True, help="interpreter for the oracle")
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--show", type=int, default=3, help="jobs printed per non-agreeing class")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    jobs = [generate(rng) for _ in range(args.jobs)]
    oracle = subprocess.run(
        [args.python, str(ORACLE), args.bareon],
        input="".join(json.dumps(j) + "\n" for j in jobs),
        capture_output=True,
        text=True,
        check=True,
    )
    answers = [json.loads(line) for line in oracle.stdout.splitlines()]
    counts: collections.Counter[str] = collections.Counter()
    for job, theirs in zip(jobs, answers, strict=True):
        verdict = classify(job, theirs)
        counts[verdict] += 1
        if not verdict.startswith("agree") and counts[verdict] <= args.show:
            print(f"--- {verdict}\n  job: {json.dumps(job)}\n  upstream: {json.dumps(theirs)}")
    for verdict, n in sorted(counts.items()):
        print(f"{n:6d}  {verdict}")
    agree = sum(n for v, n in counts.items() if v.startswith("agree"))
    documented = sum(n for v, n in counts.items() if v.startswith("documented"))
    print(
        f"agreement {agree}/{args.jobs}; apart from documented decisions "
        f"{agree}/{args.jobs - documented} = {100 * agree / (args.jobs - documented):.2f} %"
    )
    return 0 if all(v.split(":")[0] in ("agree", "documented", "tie") for v in counts) else 1


if __name__ == "__main__":
    sys.exit(main())
