"""auto_attach as a caller sees it: ``apportion solve`` on N copies minus one copy.

Run: ``.venv/bin/python bench/bench_attach_cli.py [--rules R] [--copies N] [--rounds K]
[--before GIT_REF]``

The job is bench_attach.py's (2,000 pools, 200 stacks, 20 installed products). Each
round runs ``python -m apportion.cli solve auto_attach FILE`` on a file holding one copy
of the job and on a file holding N copies (a JSON array), and takes the difference over
N − 1: the cost of one more job — reading its JSON, validation, the engine, the
envelope and writing it — without the interpreter's start-up and imports. Wall time
and CPU time (user + system of the child) are both reported; CPU time moves much less
with the machine's load.

With ``--before REF`` the same is measured for the code at that git commit (its
``src/`` unpacked with ``git archive`` into a temporary directory and put first on
``PYTHONPATH``), alternating with the current code round by round, so that both see the
same machine; the ratio is taken round by round and its median reported.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Mapping
from io import BytesIO
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.bench_attach import make_job  # noqa: E402


def _solve(path: Path, env: Mapping[str, str]) -> tuple[float, float]:
    """Wall and CPU milliseconds of one ``apportion solve`` process on ``path``."""
    command = [sys.executable, "-m", "apportion.cli", "solve", "auto_attach", str(path)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, env=dict(env), check=True, stdout=subprocess.DEVNULL)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def per_job(one: Path, many: Path, copies: int, env: Mapping[str, str]) -> tuple[float, float]:
    wall_1, cpu_1 = _solve(one, env)
    wall_n, cpu_n = _solve(many, env)
    return (wall_n - wall_1) / (copies - 1), (cpu_n - cpu_1) / (copies - 1)


def _unpack(ref: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(HERE.parent), "archive", ref, "src"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def _line(name: str, values: list[float]) -> str:
    return f"median {statistics.median(values):.1f}, min {min(values):.1f}, max {max(values):.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rules", default="candlepin-5.42")
    parser.add_argument("--copies", type=int, default=21)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--before", metavar="GIT_REF")
    args = parser.parse_args()
    job = make_job(rules=args.rules)
    with tempfile.TemporaryDirectory() as tmp:
        one, many = Path(tmp, "one.json"), Path(tmp, "many.json")
        one.write_text(json.dumps([job]))
        many.write_text(json.dumps([job] * args.copies))
        variants: dict[str, dict[str, str]] = {"now": dict(os.environ)}
        if args.before:
            src = _unpack(args.before, Path(tmp, "before"))
            variants["before"] = {**os.environ, "PYTHONPATH": str(src)}
        results: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in variants}
        for r in range(args.rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for name in order:
                wall, cpu = per_job(one, many, args.copies, variants[name])
                results[name][0].append(wall)
                results[name][1].append(cpu)
    load = os.getloadavg()[0]
    print(
        f"auto_attach ({args.rules}), 2,000 pools / 200 stacks / 20 products, per job through "
        f"`apportion solve` ({args.copies} copies minus one, {args.rounds} rounds, load {load:.1f})"
    )
    for name, (wall, cpu) in results.items():
        print(f"  {name}: wall {_line(name, wall)} ms; CPU {_line(name, cpu)} ms")
    if "before" in results:
        ratios = [n / b for n, b in zip(results["now"][1], results["before"][1], strict=True)]
        walls = [n / b for n, b in zip(results["now"][0], results["before"][0], strict=True)]
        print(
            f"  now / before, paired by round: CPU {statistics.median(ratios):.2f} "
            f"(min {min(ratios):.2f}, max {max(ratios):.2f}); wall {statistics.median(walls):.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
