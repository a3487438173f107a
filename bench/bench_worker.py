"""End-to-end worker throughput: small partition jobs vs a no-op task, same run.

    .venv/bin/python bench/bench_worker.py [--jobs 2000] [--rounds 3] [--concurrency 2]

Starts a dedicated redis-server on a free port and one real ``celery worker``
(prefork, the production configuration) consuming both the ``partition`` queue and
a ``bench`` queue with a no-op task. Each round sends N jobs of one kind at once and
times until every result is in the result backend; kinds alternate so drift hits
both equally. Reports jobs/s (median of rounds) and the ratio partition / no-op
(target ≥ 0.8, SPEC.md §6).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from config.settings import Settings  # noqa: E402
from tests.support.processes import RedisServer, Worker, free_port  # noqa: E402
from workers.app import create_app  # noqa: E402

SMALL_PARTITION = {
    "schema": [
        {"id": "os", "type": "vg", "contains": [{"id": "root"}, {"id": "swap"}]},
        {"id": "root", "type": "lv", "min_size": 5000, "mount": "/"},
        {"id": "swap", "type": "lv", "size": 2048},
    ],
    "hardware": {"ram": 1024, "disks": [{"id": "sda", "size": 40000}]},
}


def drain(client: Any, ids: list[str], timeout: float = 600) -> None:
    keys = [f"celery-task-meta-{i}" for i in ids]
    deadline = time.monotonic() + timeout
    pending = keys
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(pending)} results missing")
        values = client.mget(pending)
        pending = [k for k, v in zip(pending, values, strict=True) if v is None]
        if pending:
            time.sleep(0.01)


def one_round(app: Any, client: Any, name: str, queue: str, n: int, tag: str) -> float:
    jobs = [{**SMALL_PARTITION, "job_id": f"{tag}-{i}"} for i in range(n)]
    started = time.perf_counter()
    ids = [app.send_task(name, args=[job], queue=queue).id for job in jobs]
    drain(client, ids)
    return n / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="apportion-bench-"))
    server = RedisServer(port=free_port(), workdir=workdir)
    server.start()
    worker = Worker(
        env={"APPORTION_REDIS_URL": server.url},
        queues="partition,bench",
        concurrency=args.concurrency,
        logfile=workdir / "worker.log",
        app_module="bench.worker_app",
    )
    try:
        worker.start()
        app = create_app(Settings(redis_url=server.url))
        client = server.client()
        # Warm up both paths (imports, scipy, HiGHS) before timing.
        one_round(app, client, "bench.noop", "bench", 50, "warm-noop")
        one_round(app, client, "apportion.partition", "partition", 50, "warm-part")
        noop, part = [], []
        for r in range(args.rounds):
            noop.append(one_round(app, client, "bench.noop", "bench", args.jobs, f"n{r}"))
            part.append(
                one_round(app, client, "apportion.partition", "partition", args.jobs, f"p{r}")
            )
            print(f"round {r + 1}: no-op {noop[-1]:7.1f} jobs/s   partition {part[-1]:7.1f} jobs/s")
        n_med, p_med = statistics.median(noop), statistics.median(part)
        print(
            f"median: no-op {n_med:.1f} jobs/s, partition {p_med:.1f} jobs/s, "
            f"ratio {p_med / n_med:.2f} (target ≥ 0.80)"
        )
    finally:
        worker.stop()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
