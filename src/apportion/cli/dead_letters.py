"""``apportion dead-letters``: messages the workers would not run: list, show, requeue."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "dead-letters", help="messages the workers would not run: list, show or requeue one"
    )
    p.add_argument("--count", type=int, default=50, help="how many, newest first (default 50)")
    p.add_argument("--reason", help="only this reason (e.g. quarantined, not_json)")
    p.add_argument("--json", action="store_true", help="a JSON array, messages included")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--show", metavar="ID", help="print one entry with its message")
    group.add_argument(
        "--requeue",
        metavar="ID",
        help="push the entry's message back onto its queue (refused, saying why, for a "
        "message that can never run: not_json, bad_properties, …)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from apportion.workers.broker.dead_letters_cli import run as run_dead_letters

    code: int = run_dead_letters(
        count=args.count,
        reason=args.reason,
        as_json=args.json,
        show=args.show,
        requeue=args.requeue,
    )
    return code
