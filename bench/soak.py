"""Soak: many small mixed jobs through one worker; worker RSS and Redis memory stay bounded.

    .venv/bin/python bench/soak.py [--jobs 20000] [--concurrency 2] [--backlog 400]
                                   [--ttl 60] [--maxlen 1000] [--plot bench/soak.png]

Starts a dedicated redis-server on a free port and one real ``celery worker`` (prefork,
the production configuration) with the retention settings turned down so that a run of
minutes reaches its steady state: results expire after ``--ttl`` s
(APPORTION_RESULT_EXPIRES), published markers after 1.5 × ``--ttl``
(APPORTION_DEDUP_TTL), launch failures (and their event markers) are kept 2 × ``--ttl``
(APPORTION_FAILURE_RETENTION_HOURS), and every stream is capped at about ``--maxlen``
entries (APPORTION_STREAM_MAXLEN). Jobs of every kind (mostly small: the vendored
examples) are fed so that about ``--backlog`` wait in the queues: a steady load, not one
huge backlog that would measure the queue instead of the service.

Every second it samples the worker's resident memory (main process + pool children, not
the yaql children that live for milliseconds; RSS and PSS from /proc) and Redis
``INFO memory`` used_memory; every tenth sample it also counts apportion's keys. Every
result event is read off its stream as it appears and counted per job (none may be
missing or repeated). "Bounded" is judged on the second half of the run: the slope of
each figure against jobs done, per 1,000 jobs, next to what one job would leave behind if
nothing expired. After the last job it idles until every TTL has passed and samples once
more.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from apportion.config.settings import Settings  # noqa: E402
from apportion.workers.app import create_app  # noqa: E402
from tests.support.jobs import VARIANTS, mixed_jobs, queued_and_unacked  # noqa: E402
from tests.support.processes import RedisServer, Worker, free_port  # noqa: E402

# Mostly small and cheap jobs; partition (a forked yaql child and an LP) least often.
WEIGHTS = {
    "partition": 1,
    "auto_attach": 2,
    "guest_host_attach": 2,
    "launch_select_default_policy": 2,
    "launch_select_policy": 2,
    "launch_outcome": 3,
}
KINDS = sorted({kind for kind, _ in VARIANTS.values()})
STREAMS = [f"apportion:results:{k}" for k in KINDS] + ["apportion:launch-failures"]
KEY_PATTERNS = {
    "results": "celery-task-meta-*",
    "published_markers": "apportion:published:*",
    "outcome_markers": "apportion:outcome:*",
    "failure_histories": "apportion:failures:*",
}
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Sample:
    t: float
    done: int  # jobs whose result event was seen
    rss: int  # worker main + children, bytes (shared pages counted in each)
    pss: int  # the same, shared pages divided among the processes sharing them
    redis: int  # used_memory, bytes
    queued: int
    stream_entries: int
    keys: dict[str, int] | None  # counts per KEY_PATTERNS (every tenth sample)


def take_sample(t0: float, done: int, client: Any, worker: Worker, with_keys: bool) -> Sample:
    keys = None
    if with_keys:
        keys = {
            name: sum(1 for _ in client.scan_iter(match=pattern, count=1000))
            for name, pattern in KEY_PATTERNS.items()
        }
    return Sample(
        t=round(time.monotonic() - t0, 2),
        done=done,
        rss=worker.rss_bytes(),
        pss=worker.pss_bytes(),
        redis=int(client.info("memory")["used_memory"]),
        queued=queued_and_unacked(client)[0],
        stream_entries=sum(int(client.xlen(s)) for s in STREAMS),
        keys=keys,
    )


def read_events(client: Any, cursor: dict[str, bytes], counts: dict[str, int]) -> None:
    """Count new result events per job (read before MAXLEN trims them)."""
    for kind in KINDS:
        stream = f"apportion:results:{kind}"
        while rows := client.xrange(stream, min=b"(" + cursor.get(stream, b"0-0"), count=1000):
            for _, fields in rows:
                job = fields[b"job_id"].decode()
                counts[job] = counts.get(job, 0) + 1
            cursor[stream] = rows[-1][0]


def slope_per_1000(samples: list[Sample], attr: str) -> float:
    """Least-squares growth of ``attr`` (MiB) per 1,000 jobs done."""
    xs = [float(s.done) for s in samples]
    if len(xs) < 2 or max(xs) == min(xs):
        return 0.0
    ys = [getattr(s, attr) / MIB for s in samples]
    return statistics.linear_regression(xs, ys).slope * 1000


def bytes_per_job(client: Any) -> dict[str, float]:
    """Mean Redis memory (MEMORY USAGE) of what one job leaves behind, by key type."""
    out = {}
    for name, pattern in KEY_PATTERNS.items():
        if name == "failure_histories":
            continue
        found = list(itertools.islice(client.scan_iter(match=pattern, count=1000), 2000))
        picked = random.Random(0).sample(found, min(50, len(found)))
        sizes = [client.memory_usage(k) or 0 for k in picked]
        out[name] = statistics.mean(sizes) if sizes else 0.0
    entries = sum(int(client.xlen(s)) for s in STREAMS[:-1])
    streams = sum(client.memory_usage(s) or 0 for s in STREAMS[:-1])
    out["stream_entry"] = streams / entries if entries else 0.0
    return out


def plot(samples: list[Sample], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    xs = [s.done for s in samples]
    ax.plot(xs, [s.rss / MIB for s in samples], label="worker RSS (main + pool children)")
    ax.plot(xs, [s.pss / MIB for s in samples], label="worker PSS (main + pool children)")
    ax.plot(xs, [s.redis / MIB for s in samples], label="Redis used_memory")
    ax.set_xlabel("jobs done")
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title("apportion soak: memory under a steady load of small mixed jobs")
    fig.tight_layout()
    fig.savefig(path)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--backlog", type=int, default=400, help="jobs kept in the queues")
    parser.add_argument("--ttl", type=int, default=60, help="result expiry, seconds")
    parser.add_argument("--maxlen", type=int, default=1000, help="stream cap (entries)")
    parser.add_argument("--plot", type=Path, default=None, help="write a PNG of the samples")
    parser.add_argument("--samples", type=Path, default=None, help="write the samples (JSON)")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="apportion-soak-"))
    server = RedisServer(port=free_port(), workdir=workdir)
    server.start()
    limits = {
        **{f"APPORTION_TIME_LIMITS__{q}__SOFT": "20" for q in ("ATTACH", "LAUNCH", "PARTITION")},
        **{f"APPORTION_TIME_LIMITS__{q}__HARD": "30" for q in ("ATTACH", "LAUNCH", "PARTITION")},
    }
    env = {
        "APPORTION_REDIS_URL": server.url,
        "APPORTION_RESULT_EXPIRES": str(args.ttl),
        "APPORTION_STREAM_MAXLEN": str(args.maxlen),
        # The idempotency windows must outlast the visibility timeout (Settings checks).
        "APPORTION_VISIBILITY_TIMEOUT": str(max(31, args.ttl)),
        "APPORTION_DEDUP_TTL": str(max(32, args.ttl * 3 // 2)),
        "APPORTION_FAILURE_RETENTION_HOURS": str(max(32, 2 * args.ttl) / 3600),
        **limits,
    }
    worker = Worker(
        env=env,
        concurrency=args.concurrency,
        logfile=workdir / "worker.log",  # INFO, as deployed (docker-compose.yml)
    )
    client = server.client()
    # The producer does not wait for results: a disabled backend spares it a pub/sub
    # subscription per task. The worker still stores every result (with its TTL).
    app = create_app(Settings(redis_url=server.url), backend="disabled://")
    jobs = mixed_jobs(args.jobs, "soak", weights=WEIGHTS)
    samples: list[Sample] = []
    counts: dict[str, int] = {}
    cursor: dict[str, bytes] = {}
    try:
        worker.start()
        t0 = time.monotonic()
        next_sample = 0.0
        sent = 0
        while len(counts) < args.jobs:
            queued, _ = queued_and_unacked(client)
            room = min(args.backlog - queued, args.jobs - sent)
            for job in jobs[sent : sent + max(0, room)]:
                if job.kind == "launch_outcome":  # a failure reported now, not at start
                    job.payload["at"] = datetime.now(UTC).isoformat()
                app.send_task(job.task_name, args=[job.payload])
            sent += max(0, room)
            read_events(client, cursor, counts)
            if time.monotonic() - t0 >= next_sample:
                samples.append(take_sample(t0, len(counts), client, worker, len(samples) % 10 == 0))
                next_sample += 1.0
            if time.monotonic() - t0 > 3600:
                raise TimeoutError(f"only {len(counts)} of {args.jobs} jobs done in an hour")
            time.sleep(0.05)
        elapsed = time.monotonic() - t0
        samples.append(take_sample(t0, len(counts), client, worker, True))
        per_job = bytes_per_job(client)
        # Idle until every TTL has passed: what a quiet service keeps.
        time.sleep(max(32, 2 * args.ttl) + 5)
        read_events(client, cursor, counts)
        idle = take_sample(t0, len(counts), client, worker, True)
    finally:
        worker.stop()
        server.stop()

    missing = sum(1 for j in jobs if j.key not in counts)
    duplicates = sum(1 for n in counts.values() if n > 1)
    half = [s for s in samples if s.done >= args.jobs // 2]
    peak_rss = max(samples, key=lambda s: s.rss)
    peak_redis = max(samples, key=lambda s: s.redis)
    end = samples[-1]
    kept_if_never_expired = sum(
        per_job[k] for k in ("results", "published_markers", "stream_entry")
    ) + per_job["outcome_markers"] * WEIGHTS["launch_outcome"] / sum(WEIGHTS.values())
    report = {
        "command": " ".join(sys.argv),
        "jobs": args.jobs,
        "seconds": round(elapsed, 1),
        "jobs_per_s": round(args.jobs / elapsed, 1),
        "missing_events": missing,
        "duplicate_events": duplicates,
        "worker_rss_mib": {
            "first_sample": round(samples[0].rss / MIB, 1),
            "peak": round(peak_rss.rss / MIB, 1),
            "peak_at_jobs": peak_rss.done,
            "end": round(end.rss / MIB, 1),
            "after_idle": round(idle.rss / MIB, 1),
            "slope_2nd_half_mib_per_1000_jobs": round(slope_per_1000(half, "rss"), 3),
        },
        "worker_pss_mib": {
            "first_sample": round(samples[0].pss / MIB, 1),
            "peak": round(max(s.pss for s in samples) / MIB, 1),
            "end": round(end.pss / MIB, 1),
            "after_idle": round(idle.pss / MIB, 1),
            "slope_2nd_half_mib_per_1000_jobs": round(slope_per_1000(half, "pss"), 3),
        },
        "redis_used_memory_mib": {
            "first_sample": round(samples[0].redis / MIB, 1),
            "peak": round(peak_redis.redis / MIB, 1),
            "peak_at_jobs": peak_redis.done,
            "end": round(end.redis / MIB, 1),
            "after_idle": round(idle.redis / MIB, 1),
            "slope_2nd_half_mib_per_1000_jobs": round(slope_per_1000(half, "redis"), 3),
            "if_nothing_expired_mib_per_1000_jobs": round(kept_if_never_expired * 1000 / MIB, 2),
        },
        "bytes_per_job": {k: round(v) for k, v in per_job.items()},
        "keys_at_end": end.keys,
        "stream_entries_at_end": end.stream_entries,
        "keys_after_idle": idle.keys,
        "stream_entries_after_idle": idle.stream_entries,
        "max_queued": max(s.queued for s in samples),
    }
    print(json.dumps(report, indent=2))
    if args.samples:
        args.samples.write_text(json.dumps([asdict(s) for s in [*samples, idle]]))
    if args.plot:
        plot(samples, args.plot)
        print(f"wrote {args.plot}")
    return 0 if missing == 0 and duplicates == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
