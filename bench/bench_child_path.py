"""Instructions per job on a pool child's path, counted by valgrind (callgrind).

    .venv/bin/python bench/bench_child_path.py [--jobs 100] [--warmup 30] [--engine-only]

One process runs what a worker's pool child runs for each small partition job
(bench_worker.SMALL_PARTITION, its own job_id each): Celery's tracer for the task
(``build_tracer``, as the pool calls it), the task, its signals, the job's log line
through a handler with Celery's worker format, and the event (with the task's result)
to a real redis-server of its own, with billiard's kind of SIGUSR1 handler installed.
Not counted: billiard's pipe and the pickling of the request. Under
``valgrind --tool=callgrind --instr-atstart=no`` it runs the warm-up jobs
uninstrumented, then counts the instructions of ``--jobs`` jobs only (collection
switched on and dumped by callgrind_control around them). Instruction counts do not
move with the machine's load, where thread CPU times on a shared machine do by several
per cent; they miss cache misses, so they rank changes to the same path, not machines.

``--engine-only`` counts ``apportion.engine.run("partition", job)`` alone on the same
jobs (no Celery, no log line, no redis-server): the engine's share of the path.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.processes import RedisServer, free_port  # noqa: E402


def engine_child(jobs: int, warmup: int, sync: Path) -> None:
    """``engine.run`` alone, ``warmup + jobs`` times (run under valgrind)."""
    from apportion.engine import run
    from bench.bench_worker import SMALL_PARTITION

    tag = os.getpid()
    for i in range(warmup + jobs):
        if i == warmup:
            _handshake(sync, "ready", "go")
        got = run("partition", {**SMALL_PARTITION, "job_id": f"j-{tag}-{i:06d}"})
        if got.status != "ok":
            raise SystemExit(f"job {i}: {got!r}")
    _handshake(sync, "done", "end")


def child(url: str, jobs: int, warmup: int, sync: Path) -> None:
    """The pool child's path, ``warmup + jobs`` times (run under valgrind)."""
    from celery.app.trace import build_tracer
    from celery.utils.log import ColorFormatter

    from apportion.config.settings import Settings
    from apportion.workers.app import create_app
    from apportion.workers.logs import configure
    from apportion.workers.runtime import build_runtime, set_runtime
    from bench.bench_worker import SMALL_PARTITION

    # billiard's SIGUSR1 handler (the soft time limit) in a pool child is a Python one.
    signal.signal(signal.SIGUSR1, lambda *_: None)
    settings = Settings(redis_url=url)
    app = create_app(settings)
    set_runtime(build_runtime(settings))
    handler = logging.FileHandler(os.devnull)
    handler.setFormatter(
        ColorFormatter("[%(asctime)s: %(levelname)s/%(processName)s] %(message)s", use_color=False)
    )
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    configure(root, logging.INFO)
    task = app.tasks["apportion.partition"]
    trace = build_tracer(task.name, task, hostname="bench@child", app=app)
    tag = os.getpid()
    for i in range(warmup + jobs):
        if i == warmup:
            _handshake(sync, "ready", "go")
        task_id = f"t-{tag}-{i:06d}"
        request = {"id": task_id, "delivery_info": {}, "hostname": "bench@child"}
        request["apportion_sent_at"] = time.time()
        got = trace(task_id, [{**SMALL_PARTITION, "job_id": f"j-{tag}-{i:06d}"}], {}, request)
        if not repr(got.retval).startswith("OK "):
            raise SystemExit(f"job {i}: {got.retval!r}")
    _handshake(sync, "done", "end")


# Passed to the child in place of a redis URL.
_ENGINE_ONLY = "engine-only"


def _handshake(sync: Path, mine: str, theirs: str) -> None:
    (sync / mine).touch()
    while not (sync / theirs).exists():
        time.sleep(0.05)


def count(url: str, jobs: int, warmup: int) -> int:
    """Instructions of ``jobs`` jobs in a child run under callgrind."""
    with tempfile.TemporaryDirectory(prefix="bench-child-") as tmp:
        sync, out = Path(tmp), Path(tmp) / "callgrind.out"
        argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
        argv += [f"--callgrind-out-file={out}", sys.executable, __file__, "--child"]
        argv += [url, str(jobs), str(warmup), tmp]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _wait(sync / "ready", proc)
            control = ["callgrind_control"]
            subprocess.run([*control, "-i", "on", str(proc.pid)], check=True, capture_output=True)
            subprocess.run([*control, "-z", str(proc.pid)], check=True, capture_output=True)
            (sync / "go").touch()
            _wait(sync / "done", proc)
            subprocess.run([*control, "-d", str(proc.pid)], check=True, capture_output=True)
            subprocess.run([*control, "-i", "off", str(proc.pid)], check=True, capture_output=True)
            (sync / "end").touch()
            _, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
        if proc.returncode != 0:
            raise SystemExit(err.decode()[-2000:])
        dump = Path(f"{out}.1").read_text()
        totals = [line for line in dump.splitlines() if line.startswith("totals:")]
        return int(totals[0].split()[1])


def _wait(path: Path, proc: subprocess.Popen[bytes]) -> None:
    while not path.exists():
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr is not None else b""
            raise SystemExit(f"the child ended early: {err.decode()[-2000:]}")
        time.sleep(0.2)


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        url, jobs, warmup, sync = sys.argv[2:6]
        if url == _ENGINE_ONLY:
            engine_child(int(jobs), int(warmup), Path(sync))
        else:
            child(url, int(jobs), int(warmup), Path(sync))
        return 0
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--engine-only", action="store_true", help="engine.run alone")
    args = parser.parse_args()
    if args.engine_only:
        total = count(_ENGINE_ONLY, args.jobs, args.warmup)
        print(f"{args.jobs} jobs: {total} instructions, {total / args.jobs:,.0f} a job")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-child-redis-") as tmp:
        server = RedisServer(free_port(), Path(tmp))
        server.start()
        try:
            total = count(server.url, args.jobs, args.warmup)
        finally:
            server.stop()
    print(f"{args.jobs} jobs: {total} instructions, {total / args.jobs:,.0f} a job")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
