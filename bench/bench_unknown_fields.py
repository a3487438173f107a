"""What the unknown-field check adds to a whole job (apportion.unknown_fields).

Paired rounds in one process: the same job through ``apportion.engine.run`` with the
check, then with it replaced by a no-op, alternating; medians and the median of the
per-pair ratios. Jobs: the auto_attach example with 2,000 pools in Candlepin's
attribute-rich shape (the largest job kind by object count), and the launch_select
example:

    .venv/bin/python bench/bench_unknown_fields.py --rounds 21

Results: bench/cli.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

from apportion import engine, unknown_fields  # noqa: E402


def attach_job(pools: int) -> dict[str, Any]:
    job: dict[str, Any] = json.loads((REPO / "examples" / "auto_attach.json").read_text())
    pool = job["pools"][0]
    job["pools"] = [
        dict(
            pool,
            id=f"pool-{i}",
            attributes={"support_level": "Premium", "virt_limit": "4", "sockets": "2"},
            href=f"/pools/pool-{i}",
            owner={"key": "acme"},
            created="2026-01-01T00:00:00Z",
        )
        for i in range(pools)
    ]
    return job


def timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def compare(kind: str, job: dict[str, Any], rounds: int) -> None:
    real = unknown_fields.find

    def without(*_: Any) -> tuple[()]:
        return ()

    with_check: list[float] = []
    without_check: list[float] = []
    for _ in range(rounds + 1):
        with_check.append(timed(lambda: engine.run(kind, job)))
        unknown_fields.find = without  # type: ignore[assignment]
        try:
            without_check.append(timed(lambda: engine.run(kind, job)))
        finally:
            unknown_fields.find = real
    pairs = list(zip(with_check[1:], without_check[1:], strict=True))
    a = statistics.median(p[0] for p in pairs) * 1000
    b = statistics.median(p[1] for p in pairs) * 1000
    ratio = statistics.median(x / y for x, y in pairs)
    print(f"{kind:<14} with {a:7.2f} ms  without {b:7.2f} ms  with/without {ratio:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    compare("auto_attach", attach_job(2000), args.rounds)
    launch = json.loads((REPO / "examples" / "launch_select.json").read_text())
    compare("launch_select", launch, args.rounds)
    partition = json.loads((REPO / "examples" / "partition.json").read_text())
    compare("partition", partition, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
