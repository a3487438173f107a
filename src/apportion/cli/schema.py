"""``apportion schema``: JSON Schemas of jobs and envelopes (docs/schemas/ is made by it)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from apportion.cli.common import (
    EXIT_OK,
    KIND_HELP,
    UsageError,
    add_pretty,
    check_kind,
    print_json,
    settings,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "schema", help="print the JSON Schema of a job kind (or write every kind's with --all)"
    )
    p.add_argument("kind", nargs="?", help=KIND_HELP)
    p.add_argument("--result", action="store_true", help="the result envelope's schema instead")
    p.add_argument(
        "--all",
        action="store_true",
        help="every kind: <kind>.json and <kind>.result.json into --out (docs/schemas)",
    )
    p.add_argument("--out", help="directory for --all")
    p.add_argument("--list", action="store_true", help="list the kinds, their queues and tasks")
    add_pretty(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from apportion import kinds

    settings()  # a deployment's own kinds (APPORTION_KIND_MODULES) are listed too
    if args.list:
        for kind in kinds.REGISTRY.values():
            print(f"{kind.name:<20} {kind.task_name:<30} queue {kind.queue:<10} {kind.summary}")
        return EXIT_OK
    if args.all:
        if not args.out:
            raise UsageError("--all needs --out DIRECTORY")
        from apportion.schemas import schema_files

        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for name, data in schema_files().items():
            (out / name).write_bytes(data)
        print(f"wrote {len(kinds.REGISTRY) * 2} schemas to {out}")
        return EXIT_OK
    if not args.kind:
        raise UsageError("name a KIND (or --all --out DIR, or --list)")
    from apportion.schemas import job_schema, result_schema

    check_kind(args.kind)
    print_json(result_schema(args.kind) if args.result else job_schema(args.kind), args.pretty)
    return EXIT_OK
