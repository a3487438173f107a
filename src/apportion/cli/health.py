"""``apportion health``: exit 0 when the system can answer jobs, 1 when it cannot.

For scripts and container health checks: Redis reachable, a live worker on every
queue (or on the queues named with ``--queue``, or the worker named with ``--node``),
queue depths, and per consumer group the oldest entry still waiting for its ack.
Bounded in time: about ``--timeout`` seconds when all is well, less when Redis is down.
"""

from __future__ import annotations

import argparse
from typing import Any

from apportion.cli.common import EXIT_FAILED, EXIT_OK, UsageError, print_json, settings


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "health", help="check Redis, the workers per queue, queue depths and consumer groups"
    )
    p.add_argument("--queue", action="append", help="check only this queue (repeatable)")
    p.add_argument("--node", help="also require this worker (e.g. attach@host) to answer")
    p.add_argument(
        "--timeout", type=float, default=1.0, help="seconds to wait for Redis and workers (1)"
    )
    p.add_argument(
        "--max-queue-depth",
        type=int,
        help="unhealthy when a queue holds more jobs (default: no limit)",
    )
    p.add_argument(
        "--max-pending-age",
        type=float,
        help="unhealthy when a stream entry waits longer than this for its ack (seconds; "
        "default: no limit)",
    )
    p.add_argument("--json", action="store_true", help="the report as one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from apportion import kinds
    from apportion.workers.health import Thresholds, check

    config = settings()
    unknown = sorted(set(args.queue or ()) - set(kinds.queues()))
    if unknown:
        raise UsageError(f"unknown queue(s) {unknown}; queues are {list(kinds.queues())}")
    health = check(
        config,
        queues=args.queue,
        node=args.node,
        timeout=args.timeout,
        thresholds=Thresholds(args.max_queue_depth, args.max_pending_age),
    )
    if args.json:
        print_json(health.as_dict())
    else:
        print(render(health.as_dict()))
    return EXIT_OK if health.healthy else EXIT_FAILED


def render(report: dict[str, Any]) -> str:
    redis = report["redis"]
    lines = [
        f"{'healthy' if report['healthy'] else 'UNHEALTHY'} ({report['elapsed_s']:.2f} s)",
        f"redis   {redis['url']}  "
        + (f"ok (Redis {redis['version']})" if redis["ok"] else "unreachable"),
    ]
    if redis["ok"]:
        lines.append(f"{'queue':<12} {'depth':>7}  workers")
        for queue, q in report["queues"].items():
            workers = ", ".join(q["workers"]) or "(none)"
            lines.append(f"{queue:<12} {q['depth']:>7}  {workers}")
        lines.append(f"jobs taken but not yet acknowledged: {report['unacked']}")
        for name, stream in report["streams"].items():
            lines.append(f"stream {name}: {stream['length']} entries")
            for group, g in stream["groups"].items():
                age = g["oldest_pending_age_s"]
                oldest = f", oldest pending {age:.0f} s" if age is not None else ""
                lag = "?" if g["lag"] is None else g["lag"]
                lines.append(
                    f"  group {group}: {g['consumers']} consumers, {g['pending']} pending, "
                    f"lag {lag}{oldest}"
                )
            for group, lost in stream.get("trimmed_unread", {}).items():
                lines.append(f"  group {group}: {lost} entries trimmed before it read them")
        lines.append(f"dead letters: {report['dead_letters']}")
    lines += [f"problem: {p}" for p in report["problems"]]
    return "\n".join(lines)
