"""Redis time a big job costs on its way through a real worker, from Redis's own
accounting: this tree against another (``--before REV``, main by default), in
alternating rounds of one run.

    .venv/bin/python bench/bench_take.py [--before main] [--jobs 50] [--rounds 3]
    .venv/bin/python bench/bench_take.py --small [--jobs 300] [--rounds 5]

``--small``: the worker benchmark's small partition job instead (``-Q partition -c 2``),
with jobs/s and the worker's CPU a job (main process, and all its processes, /proc):
what the take's round trips cost where Redis time is not the limit.

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
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_placement import SIMPLE, numa_cloud  # noqa: E402

from apportion.config.settings import Settings  # noqa: E402
from apportion.workers.app import create_app  # noqa: E402
from apportion.workers.redis.keys import Keys  # noqa: E402
from tests.support.jobs import SMALL_PARTITION  # noqa: E402
from tests.support.processes import RedisServer, Worker, free_port, wait_until  # noqa: E402

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Kind:
    queue: str
    task: str
    concurrency: int
    job: dict[str, Any]

    @property
    def stream(self) -> str:
        return Keys().results_stream(self.task.removeprefix("apportion."))


def _cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


_BLOCKING = {"brpop", "blmove", "lmove"}
_TAKE_KEYS = {"launch", "partition", "unacked", "unacked_index", "apportion:takers"}
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
    def __init__(self, name: str, workdir: Path, pythonpath: str | None, kind: Kind) -> None:
        self.name = name
        self.kind = kind
        self.server = RedisServer(port=free_port(), workdir=workdir / name)
        self.server.start()
        self.client = self.server.client()
        self.client.config_set("slowlog-log-slower-than", 0)
        self.client.config_set("slowlog-max-len", 100_000)
        env = {"APPORTION_REDIS_URL": self.server.url}
        if pythonpath is not None:
            env["PYTHONPATH"] = pythonpath
        self.worker = Worker(
            env=env,
            logfile=workdir / f"{name}.log",
            queues=kind.queue,
            concurrency=kind.concurrency,
        )
        self.worker.start(ready_timeout=120)
        self.app = create_app(Settings(redis_url=self.server.url))
        self.rounds: list[dict[str, float]] = []

    def round(self, jobs: int) -> None:
        stream = self.kind.stream
        self.client.delete(stream)
        self.client.config_resetstat()
        self.client.slowlog_reset()
        run = len(self.rounds)  # an answered job_id is never published again
        pids = self.worker.pool_pids()
        cpu = [_cpu(pid) for pid in pids]
        started = time.perf_counter()
        for i in range(jobs):
            job = {**self.kind.job, "job_id": f"job-{run}-{i}"}
            self.app.send_task(self.kind.task, args=[job])
        wait_until(lambda: self.client.xlen(stream) >= jobs, 600, 0.01, "every answer")
        wall = time.perf_counter() - started
        spent = [_cpu(pid) - before for pid, before in zip(pids, cpu, strict=True)]
        per: dict[str, float] = defaultdict(float)
        for entry in self.client.slowlog_get(100_000):
            kind = kind_of(entry)
            if kind == "other" and _bench_own(entry):
                continue
            per[kind] += entry["duration"]
        stats = self.client.info("commandstats")
        row = {k: v / jobs for k, v in per.items()}
        row["total"] = sum(per.values()) / jobs
        row["jobs/s"] = jobs / wall
        row["main CPU µs"] = spent[0] * 1e6 / jobs
        row["worker CPU µs"] = sum(spent) * 1e6 / jobs
        for name in ("evalsha", "blmove", "brpop", "lmove", "exec"):
            if f"cmdstat_{name}" in stats:
                row[f"{name} µs/call"] = stats[f"cmdstat_{name}"]["usec_per_call"]
        statuses = {f[b"status"] for _, f in self.client.xrange(stream) if b"status" in f}
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
    parser.add_argument("--small", action="store_true", help="small partition jobs")
    args = parser.parse_args()
    # Stopped early, it still stops its workers and servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if args.small:
        kind = Kind("partition", "apportion.partition", 2, dict(SMALL_PARTITION))
    else:
        big = {"providers": numa_cloud(1000), "request": SIMPLE, "policy": None}
        kind = Kind("launch", "apportion.launch_select", 1, big)
    with tempfile.TemporaryDirectory(prefix="bench-take-") as tmp:
        workdir = Path(tmp)
        (workdir / "before").mkdir()
        sides = [
            Side("before", workdir, export(args.before, workdir / "before"), kind),
            Side("after", workdir, None, kind),
        ]
        try:
            for r in range(args.rounds):
                for side in sides if r % 2 == 0 else sides[::-1]:
                    side.round(args.jobs)
        finally:
            for side in sides:
                side.close()
    print(f"{args.jobs} {kind.task} jobs a round, {args.rounds} rounds; medians a job")
    for side in sides:
        columns = sorted({k for row in side.rounds for k in row})
        text = ", ".join(
            f"{k} {statistics.median(row.get(k, 0.0) for row in side.rounds):.0f}" for k in columns
        )
        print(f"  {side.name:<6} ({args.before if side.name == 'before' else 'this tree'}): {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
