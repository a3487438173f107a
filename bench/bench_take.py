"""Redis time a big job costs on its way through a real worker, from Redis's own
accounting: this tree against another (``--before REV``, main by default), in
alternating rounds of one run.

    .venv/bin/python bench/bench_take.py [--before main] [--jobs 50] [--rounds 3]

Each side has its own redis-server (free port) and one ``celery worker -Q launch -c 1``
from its tree (REV is exported with ``git archive`` and run through ``PYTHONPATH``). A
round: ``CONFIG RESETSTAT`` and ``SLOWLOG RESET`` (threshold 0: every command is
logged with the microseconds Redis spent on it), N copies of the 1,000-host flat
launch_select job (4,000 candidates, bench_placement.numa_cloud) sent with
``send_task``, wait until the N answers are on the result stream (all ``ok``), then
read both. Per job: Redis µs in the worker's *take* (the blocking command and the
scripts that take and record a job), its *ack*, and everything (the producer's LPUSH,
the answer's publish and result record included); and ``usec_per_call`` of the take
commands from ``INFO commandstats``. Figures go in bench/worker.md.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_placement import SIMPLE, numa_cloud  # noqa: E402

from apportion.config.settings import Settings  # noqa: E402
from apportion.workers.app import create_app  # noqa: E402
from apportion.workers.redis.keys import Keys  # noqa: E402
from tests.support.processes import RedisServer, Worker, free_port, wait_until  # noqa: E402

STREAM = Keys().results_stream("launch_select")
_BLOCKING = {"brpop", "blmove", "lmove"}
_TAKE_KEYS = {"launch", "unacked", "unacked_index", "apportion:takers"}
_TAKE_PREFIXES = ("apportion:taking:", "apportion:deliveries:")


def export(rev: str, into: Path) -> str:
    """REV's source tree as a PYTHONPATH (the package layout of pyproject's package-dir)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True)
    archive.check_returncode()
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    for part in ("config", "workers", "tasks"):
        (into / "src" / "apportion" / part).symlink_to(into / part)
    return str(into / "src")


def kind_of(entry: dict[str, Any]) -> str:
    """What a SLOWLOG entry was for: the take (moving a job off its queue and recording
    it as unacknowledged, by any command or script), the ack, or something else."""
    command = entry["command"]
    args = (command.decode(errors="replace") if isinstance(command, bytes) else command).split()
    name = args[0].lower() if args else ""
    if name in _BLOCKING:
        return "take"
    if name == "evalsha" and len(args) >= 3:
        keys = args[3 : 3 + int(args[2])]
        if len(keys) == 3 and keys[:2] == ["unacked_index", "unacked"] and "deliver" in keys[2]:
            return "ack"
    else:
        keys = args[1:2]
    if any(k in _TAKE_KEYS or k.startswith(_TAKE_PREFIXES) for k in keys):
        return "take"
    return "other"


def _bench_own(entry: dict[str, Any]) -> bool:
    """The bench's own commands (waiting and reading), not the job's."""
    command = entry["command"]
    first = (command.decode(errors="replace") if isinstance(command, bytes) else command).split()
    return bool(first) and first[0].lower() in ("info", "xlen", "slowlog", "config", "xrange")


class Side:
    def __init__(self, name: str, workdir: Path, pythonpath: str | None) -> None:
        self.name = name
        self.server = RedisServer(port=free_port(), workdir=workdir / name)
        self.server.start()
        self.client = self.server.client()
        self.client.config_set("slowlog-log-slower-than", 0)
        self.client.config_set("slowlog-max-len", 100_000)
        env = {"APPORTION_REDIS_URL": self.server.url}
        if pythonpath is not None:
            env["PYTHONPATH"] = pythonpath
        self.worker = Worker(
            env=env, logfile=workdir / f"{name}.log", queues="launch", concurrency=1
        )
        self.worker.start(ready_timeout=120)
        self.app = create_app(Settings(redis_url=self.server.url))
        self.rounds: list[dict[str, float]] = []

    def round(self, job: dict[str, Any], jobs: int) -> None:
        self.client.delete(STREAM)
        self.client.config_resetstat()
        self.client.slowlog_reset()
        run = len(self.rounds)  # an answered job_id is never published again
        for i in range(jobs):
            job_id = f"big-{run}-{i}"
            self.app.send_task("apportion.launch_select", args=[{**job, "job_id": job_id}])
        wait_until(lambda: self.client.xlen(STREAM) >= jobs, 600, 0.2, "every answer")
        per: dict[str, float] = defaultdict(float)
        for entry in self.client.slowlog_get(100_000):
            kind = kind_of(entry)
            if kind == "other" and _bench_own(entry):
                continue
            per[kind] += entry["duration"]
        stats = self.client.info("commandstats")
        row = {k: v / jobs for k, v in per.items()}
        row["total"] = sum(per.values()) / jobs
        for name in ("evalsha", "blmove", "brpop", "lmove", "exec"):
            if f"cmdstat_{name}" in stats:
                row[f"{name} µs/call"] = stats[f"cmdstat_{name}"]["usec_per_call"]
        statuses = {f[b"status"] for _, f in self.client.xrange(STREAM) if b"status" in f}
        if statuses - {b"ok"}:
            raise SystemExit(f"{self.name}: answers {statuses}")
        self.rounds.append(row)

    def close(self) -> None:
        self.app.close()
        self.worker.stop()
        self.server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", default="main", help="the other tree's git revision")
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    # Stopped early, it still stops its workers and servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    job = {"providers": numa_cloud(1000), "request": SIMPLE, "policy": None}
    with tempfile.TemporaryDirectory(prefix="bench-take-") as tmp:
        workdir = Path(tmp)
        (workdir / "before").mkdir()
        sides = [
            Side("before", workdir, export(args.before, workdir / "before")),
            Side("after", workdir, None),
        ]
        try:
            for r in range(args.rounds):
                for side in sides if r % 2 == 0 else sides[::-1]:
                    side.round(job, args.jobs)
        finally:
            for side in sides:
                side.close()
    print(f"{args.jobs} big flat launch_select jobs a round, {args.rounds} rounds; Redis µs a job")
    for side in sides:
        columns = sorted({k for row in side.rounds for k in row})
        text = ", ".join(
            f"{k} {statistics.median(row.get(k, 0.0) for row in side.rounds):.0f}" for k in columns
        )
        print(f"  {side.name:<6} ({args.before if side.name == 'before' else 'this tree'}): {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
