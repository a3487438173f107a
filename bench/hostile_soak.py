"""The hostile soak: ≥ 10,000 generated queue items through Redis and a real worker.

    .venv/bin/python bench/hostile_soak.py [--items 10000] [--backlog 500] [--seed 13]

Starts a dedicated redis-server on a free port and one real ``celery worker``
(prefork, two children, the production configuration, every queue). Items come from
tests/support/hostile_stream.py — valid jobs of every kind, decodable hostile jobs
(deep nesting, huge strings and arrays, lone surrogates, 400-digit numbers, NaN,
wrong types, duplicate keys, the wrong arguments, reused job ids, a producer's time
limit) and undecodable items (not JSON, a JSON array, properties null or missing,
headers a string, bodies that are objects, not base64 or not a call, pickle and YAML
content types, unknown tasks, random bytes) — pushed raw with LPUSH, as a producer in
any language would, keeping at most ``--backlog`` queued.

Verdict (exit 0 only if all hold): the worker's main process never changed and no pool
child was lost; every decodable item answered in the result backend with the same
envelope as on its result stream; every valid job answered as the engine answers it
in-process; every undecodable item dead-lettered and never executed. Printed: counts,
throughput, Redis ``used_memory`` (start, peak, end) and the worker's RSS, sampled
every second. The figures go to bench/faults.md.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.hostile_stream import (  # noqa: E402
    QUEUE,
    HostileStream,
    all_settled,
    expected_results,
    judge,
)
from tests.support.processes import RedisServer, Worker, free_port  # noqa: E402

MIB = 1024 * 1024


def queued(client: object) -> int:
    return sum(client.llen(q) for q in set(QUEUE.values()))  # type: ignore[attr-defined]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--backlog", type=int, default=500, help="items kept in the queues")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="apportion-hostile-soak-"))
    server = RedisServer(port=free_port(), workdir=workdir)
    server.start()
    env = {"APPORTION_REDIS_URL": server.url, "PYTHONUNBUFFERED": "1"}
    worker = Worker(env=env, concurrency=args.concurrency, logfile=workdir / "worker.log")
    client = server.client()
    stream = HostileStream(random.Random(args.seed), tag=f"soak{args.seed}")
    sent = list(stream.mix(args.items))
    expected = expected_results()
    samples: list[tuple[float, int, int, int]] = []  # (t, pushed, used_memory, worker rss)
    try:
        worker.start()
        pid = worker.proc.pid  # type: ignore[union-attr]
        start_memory = int(client.info("memory")["used_memory"])
        t0 = time.monotonic()
        pushed = 0
        next_sample = 0.0
        while pushed < len(sent) or not all_settled(client, sent):
            room = min(args.backlog - queued(client), len(sent) - pushed)
            if room > 0:
                pipe = client.pipeline(transaction=False)
                for s in sent[pushed : pushed + room]:
                    pipe.lpush(s.queue, s.item)
                pipe.execute()
                pushed += room
            now = time.monotonic() - t0
            if now >= next_sample:
                used = int(client.info("memory")["used_memory"])
                samples.append((round(now, 1), pushed, used, worker.rss_bytes()))
                next_sample += 1.0
            if now > 3600:
                raise TimeoutError("not settled within an hour")
            time.sleep(0.2 if pushed < len(sent) else 1.0)
        elapsed = time.monotonic() - t0
        end_memory = int(client.info("memory")["used_memory"])
        verdict = judge(client, sent, expected)
        alive = worker.alive and worker.proc.pid == pid  # type: ignore[union-attr]
        dead_letters = int(client.xlen("apportion:dead-letters"))
    finally:
        worker.stop()
        server.stop()

    log = worker.log_text()
    lost_children = log.count("Task handler raised error: WorkerLostError")
    peak = max(samples, key=lambda s: s[2])
    report = {
        "command": " ".join(sys.argv),
        "items": len(sent),
        "seconds": round(elapsed, 1),
        "items_per_s": round(len(sent) / elapsed, 1),
        "worker_main_process_survived": alive,
        "pool_children_lost": lost_children,
        "unrecoverable_errors": log.count("Unrecoverable error"),
        "dead_letters": dead_letters,
        "verdict": verdict.summary(),
        "redis_used_memory_mib": {
            "start": round(start_memory / MIB, 1),
            "peak": round(peak[2] / MIB, 1),
            "peak_at_items_pushed": peak[1],
            "end": round(end_memory / MIB, 1),
            "growth_at_peak": round((peak[2] - start_memory) / MIB, 1),
            "growth_at_end": round((end_memory - start_memory) / MIB, 1),
        },
        "worker_rss_mib": {
            "first": round(samples[0][3] / MIB, 1),
            "peak": round(max(s[3] for s in samples) / MIB, 1),
            "end": round(samples[-1][3] / MIB, 1),
        },
    }
    print(json.dumps(report, indent=2))
    good = verdict.ok and alive and lost_children == 0 and "Unrecoverable error" not in log
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
