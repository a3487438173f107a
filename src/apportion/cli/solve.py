"""``apportion solve KIND FILE``: run the engine in-process and print the envelope(s)."""

from __future__ import annotations

import argparse
from typing import Any

from apportion.cli.common import (
    EXIT_OK,
    EXIT_REJECTED,
    KIND_HELP,
    STATUS_EXIT,
    add_pretty,
    check_kind,
    engine_settings,
    jobs_from_text,
    print_json,
    read_input,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("solve", help="run the engine on a job file and print the envelope")
    p.add_argument("kind", help=KIND_HELP)
    p.add_argument("file", help="job JSON file, or - for stdin (a JSON array runs each job)")
    add_pretty(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from apportion.engine import run as run_job
    from apportion.engine_settings import engine_context

    config = engine_settings()  # first: it loads a deployment's own kinds
    check_kind(args.kind)
    text = read_input(args.file)
    jobs, is_array, bad = jobs_from_text(args.kind, text)
    if bad is not None:
        print_json(bad.as_dict(), args.pretty)
        return EXIT_REJECTED
    context = engine_context(config)
    envelopes = [run_job(args.kind, job, context) for job in jobs]
    if is_array:
        print_json([e.as_dict() for e in envelopes], args.pretty)
        return EXIT_OK
    print_json(envelopes[0].as_dict(), args.pretty)
    return STATUS_EXIT[envelopes[0].status]
