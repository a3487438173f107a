"""CPU a producer spends on one job send: Celery's plain ``send_task`` against
``JobSender`` (what ``apportion submit`` sends with), on a real redis-server.

    .venv/bin/python bench/bench_send.py [--rounds 9] [--sends 2000] [--big]

Both ways send the same job to the same app in one process, rounds alternating (each
round's order flips), each round after a warm-up of 200 sends; the queue is emptied
between rounds. CPU = user + system of this process (``resource.getrusage``), per send,
so Redis's own work is not in it. ``--big`` sends bench_attach's 2,000-pool job instead
of the worker benchmark's small partition job (and 100 sends a round).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from apportion.config.settings import Settings  # noqa: E402
from apportion.workers.producer import JobSender, producer_app, sent_now  # noqa: E402
from bench.bench_worker import SMALL_PARTITION  # noqa: E402
from tests.support.processes import RedisServer, free_port  # noqa: E402


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _per_send(send: Callable[[dict[str, Any]], Any], job: dict[str, Any], n: int) -> float:
    for i in range(200 if n > 100 else 10):
        send({**job, "job_id": f"warm-{i}"})
    started = _cpu()
    for i in range(n):
        send({**job, "job_id": f"send-{i}"})
    return (_cpu() - started) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--sends", type=int, default=2000)
    parser.add_argument("--big", action="store_true")
    args = parser.parse_args()
    if args.big:
        from bench.bench_attach import make_job

        job, sends = make_job(rules="candlepin-5.42"), min(args.sends, 100)
        task = "apportion.auto_attach"
    else:
        job, sends = dict(SMALL_PARTITION), args.sends
        task = "apportion.partition"
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(free_port(), Path(tmp))
        server.start()
        try:
            app = producer_app(Settings(redis_url=server.url))
            client = server.client()

            def plain(j: dict[str, Any]) -> Any:  # what apportion submit sent before
                return app.send_task(task, args=[j], headers=sent_now())

            with JobSender(app) as sender:

                def held(j: dict[str, Any]) -> Any:
                    return sender.send(task, j)

                ways = {"send_task": plain, "JobSender": held}
                got: dict[str, list[float]] = {name: [] for name in ways}
                for r in range(args.rounds):
                    for name in list(ways) if r % 2 == 0 else list(reversed(ways)):
                        got[name].append(_per_send(ways[name], job, sends))
                        client.delete("partition", "attach")
        finally:
            server.stop()
    ratios = [b / a for a, b in zip(got["send_task"], got["JobSender"], strict=True)]
    for name, values in got.items():
        print(
            f"{name:>10}: µs of CPU a send, median {statistics.median(values):.0f} "
            f"(min {min(values):.0f}, max {max(values):.0f})"
        )
    print(
        f"JobSender / send_task, paired by round: median {statistics.median(ratios):.2f} "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f})"
    )


if __name__ == "__main__":
    main()
