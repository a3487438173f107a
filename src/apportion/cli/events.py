"""``apportion events``: follow the result streams with a consumer group."""

from __future__ import annotations

import argparse
from typing import Any

from apportion.cli.common import check_kind, settings


def add_parser(sub: Any) -> None:
    p = sub.add_parser("events", help="follow the result streams with a consumer group")
    p.add_argument("--kind", action="append", help="a job kind; repeatable; default all")
    p.add_argument("--group", default=None, help="consumer group (default apportion-subscribers)")
    p.add_argument(
        "--consumer",
        default=None,
        help="consumer name (default: the host's name, the same after a restart)",
    )
    p.add_argument("--count", type=int, default=None, help="exit after this many events")
    p.add_argument(
        "--idle-exit",
        type=float,
        default=None,
        help="exit after N idle seconds (default: never, follow until Ctrl-C)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument(
        "--claim-idle-ms",
        type=int,
        default=60_000,
        help="take over other consumers' entries left unacknowledged this long (default 60000)",
    )
    p.add_argument(
        "--forget-idle",
        type=float,
        default=3600.0,
        help="remove the group's consumers idle this many seconds that hold no pending "
        "entry (default 3600)",
    )
    start = p.add_mutually_exclusive_group()
    start.add_argument(
        "--from-start",
        action="store_true",
        help="read everything the streams hold, without a consumer group (nothing is "
        "acknowledged, no group's position moves)",
    )
    start.add_argument(
        "--no-group",
        action="store_true",
        help="read only new entries, without a consumer group (as a fresh group per run)",
    )
    p.add_argument(
        "--exit-on-disconnect",
        action="store_true",
        help="exit 1 when Redis stays unreachable for --connect-timeout seconds "
        "(default: keep retrying with backoff)",
    )
    p.add_argument(
        "--connect-timeout",
        type=float,
        default=30.0,
        help="with --exit-on-disconnect: seconds of Redis unreachable before exiting (30)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from apportion import kinds
    from apportion.workers.results.events_cli import follow

    settings()  # loads a deployment's own kinds (APPORTION_KIND_MODULES)
    for kind in args.kind or ():
        check_kind(kind)
    return follow(
        kinds=args.kind or list(kinds.names()),
        group=args.group,
        consumer=args.consumer,
        count=args.count,
        as_json=args.json,
        idle_exit=args.idle_exit,
        claim_idle_ms=args.claim_idle_ms,
        connect_timeout=args.connect_timeout,
        exit_on_disconnect=args.exit_on_disconnect,
        forget_idle_ms=int(args.forget_idle * 1000),
        from_start=args.from_start,
        no_group=args.no_group,
    )
