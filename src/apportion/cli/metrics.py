"""``apportion metrics``: a Prometheus exporter for what Redis holds.

Queue depth, unacknowledged jobs, stream lengths, consumer-group lag, pending entries
and their age, dead letters (workers/metrics/redis_state.py). Run one per deployment.
Per-job figures (jobs by kind and status, latency histograms) are served by each
worker when ``APPORTION_METRICS_PORT`` is set (docs/operations.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from apportion.cli.common import EXIT_FAILED, EXIT_OK, settings


def add_parser(sub: Any) -> None:
    p = sub.add_parser("metrics", help="serve Prometheus metrics of queues, streams and lag")
    p.add_argument("--port", type=int, default=9808, help="HTTP port of /metrics (9808)")
    # --host as `apportion studio` names it; --address stays accepted (deployments use it).
    p.add_argument(
        "--host",
        "--address",
        dest="host",
        default="127.0.0.1",
        help="address to bind (%(default)s; --address is the same)",
    )
    p.add_argument("--once", action="store_true", help="print the metrics once and exit")
    p.add_argument(
        "--timeout", type=float, default=2.0, help="seconds a scrape may wait for Redis (2)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from prometheus_client import CollectorRegistry, generate_latest, start_http_server

    from apportion.workers.metrics.redis_state import RedisStateCollector

    registry = CollectorRegistry()
    registry.register(RedisStateCollector(settings(), timeout=args.timeout))
    if args.once:
        text = generate_latest(registry)
        sys.stdout.buffer.write(text)
        return EXIT_OK if b"apportion_redis_up 1.0" in text else EXIT_FAILED
    start_http_server(args.port, addr=args.host, registry=registry)
    print(f"apportion metrics: serving http://{args.host}:{args.port}/metrics", flush=True)
    while True:
        time.sleep(3600)
