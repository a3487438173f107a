"""``apportion demo``: the embedded demo (an in-process worker, no Redis)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("demo", help="run the embedded demo (no Redis needed)")
    p.add_argument("--json", action="store_true", help="print envelopes and events as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from apportion.workers.demo.runner import run_demo

    return run_demo(as_json=args.json)
