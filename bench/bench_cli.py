"""Start-up time of the `apportion` command: `--help`, and `submit` of one job.

Each command is run as a whole process (start-up included), alternating between the
installations compared, and the medians of wall and CPU time (user + system, from the
operating system's accounting of the finished child) are printed:

    .venv/bin/python bench/bench_cli.py --rounds 11 [--vs /path/to/other/.venv/bin/apportion]

`submit` needs a Redis: the script starts its own redis-server on a free port (no
worker: submit without --wait returns once the job is queued). Results: bench/cli.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.processes import RedisServer, free_port  # noqa: E402

JOB = REPO / "examples" / "partition.json"


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall s, cpu s, exit status) of one run of ``argv``, output discarded."""
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: the command, its output thrown away
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.execve(argv[0], argv, env)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - started
    return wall, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--vs", help="another apportion executable, run in turn with this one")
    args = parser.parse_args()
    mine = str(Path(sys.executable).with_name("apportion"))
    builds = {"this": mine, **({"other": args.vs} if args.vs else {})}
    with tempfile.TemporaryDirectory() as workdir:
        server = RedisServer(port=free_port(), workdir=Path(workdir))
        server.start()
        try:
            env = {**os.environ, "APPORTION_REDIS_URL": server.url}
            commands = {"--help": ["--help"], "submit": ["submit", "partition", str(JOB)]}
            for label, tail in commands.items():
                results: dict[str, list[tuple[float, float, int]]] = {b: [] for b in builds}
                for _ in range(args.rounds + 1):  # the first round warms the disk cache
                    for build, exe in builds.items():
                        results[build].append(run_once([exe, *tail], env))
                timed = {build: runs[1:] for build, runs in results.items()}
                for build, runs in timed.items():
                    walls = [r[0] for r in runs]
                    cpus = [r[1] for r in runs]
                    codes = sorted({r[2] for r in runs})
                    print(
                        f"{label:<8} {build:<6} wall median {statistics.median(walls):.3f} s "
                        f"(min {min(walls):.3f}, max {max(walls):.3f})  cpu median "
                        f"{statistics.median(cpus):.3f} s  exit {codes}"
                    )
                if "other" in timed:
                    pairs = zip(timed["this"], timed["other"], strict=True)
                    ratio = statistics.median(a[0] / b[0] for a, b in pairs)
                    print(f"{label:<8} wall this/other, median of the pairs: {ratio:.2f}")
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
