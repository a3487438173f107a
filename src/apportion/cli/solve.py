"""``apportion solve KIND FILE``: run the engine in-process and print the envelope(s)."""

from __future__ import annotations

import argparse
import gc
import sys
from typing import TYPE_CHECKING, Any

from apportion.cli.common import (
    EXIT_OK,
    EXIT_REJECTED,
    KIND_HELP,
    STATUS_EXIT,
    add_pretty,
    check_kind,
    engine_settings,
    print_json,
    read_vouched_jobs,
)
from apportion.collector import collector_paused

if TYPE_CHECKING:
    from apportion.contracts.envelope import Envelope


def add_parser(sub: Any) -> None:
    p = sub.add_parser("solve", help="run the engine on a job file and print the envelope")
    p.add_argument("kind", help=KIND_HELP)
    p.add_argument("file", help="job JSON file, or - for stdin (a JSON array runs each job)")
    add_pretty(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from apportion.engine_settings import engine_context

    config = engine_settings()  # first: it loads a deployment's own kinds
    check_kind(args.kind)
    with collector_paused():
        jobs, is_array, bad, vouched = read_vouched_jobs(args.kind, args.file)
        if bad is not None:
            print_json(bad.as_dict(), args.pretty)
            return EXIT_REJECTED
        context = engine_context(config)
        # What is loaded now (the modules, the parsed input) lives until the command ends
        # and is never changed: frozen, the cyclic collector stops walking it again in
        # every full collection, as the worker does with its heap before it forks. Frozen
        # before the collector resumes, it is not walked even once.
        gc.freeze()
    if not is_array:
        envelope = solved(args.kind, jobs[0], context, vouched=vouched)
        print_json(envelope.as_dict(), args.pretty)
        return STATUS_EXIT[envelope.status]
    pretty = sys.stdout.isatty() if args.pretty is None else args.pretty
    if pretty:
        envelopes = [solved(args.kind, job, context, vouched=vouched) for job in jobs]
        print_json([e.as_dict() for e in envelopes], pretty)
    else:
        write_each(args.kind, jobs, context, vouched=vouched)
    return EXIT_OK


def write_each(kind: str, jobs: list[Any], context: Any, *, vouched: bool = False) -> None:
    """A compact JSON array of the jobs' envelopes, each written as soon as it is solved.

    Each job and its envelope are let go before the next job runs, so the heap holds one
    job's answer at a time however long the array (the bytes are those of the whole
    array encoded at once).
    """
    from apportion.codec import encode

    out = sys.stdout.buffer
    sys.stdout.flush()
    out.write(b"[")
    jobs.reverse()  # popped from the end: in input order, each dropped once solved
    separator = b""
    while jobs:
        envelope = solved(kind, jobs.pop(), context, vouched=vouched)
        out.write(separator + encode(envelope.as_dict()))
        separator = b","
    out.write(b"]\n")
    out.flush()


def solved(kind: str, job: Any, context: Any, *, vouched: bool) -> Envelope:
    """One job's envelope, solved with the collector paused (:func:`collector_paused`)."""
    from apportion.engine import run as run_job

    with collector_paused():
        return run_job(kind, job, context, vouched=vouched, decoded=True)
