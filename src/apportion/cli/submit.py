"""``apportion submit KIND FILE [--wait]``: enqueue jobs on Redis, by task name.

The broker side is :mod:`apportion.workers.submit` (the producer app: the production
configuration and no task code), so the command starts without importing any engine
and this package imports no broker library.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from apportion.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_REJECTED,
    KIND_HELP,
    STATUS_EXIT,
    add_pretty,
    check_kind,
    print_json,
    read_vouched_jobs,
    settings,
)
from apportion.collector import collector_paused

# Batches at least this long show a progress bar (on a terminal, unless --no-progress).
PROGRESS_FROM = 20


def add_parser(sub: Any) -> None:
    p = sub.add_parser("submit", help="enqueue a job (or a JSON array of jobs) on Redis")
    p.add_argument("kind", help=KIND_HELP)
    p.add_argument("file", help="job JSON file, or - for stdin (a JSON array sends each job)")
    p.add_argument("--wait", action="store_true", help="wait and print the result envelope(s)")
    p.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="give up when Redis has not taken the jobs this many seconds after the start, "
        "and, with --wait, when no further result arrives for as long (default 120)",
    )
    p.add_argument(
        "--connect-retries",
        type=int,
        default=3,
        help="broker connection attempts before giving up (default %(default)s)",
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"progress bar on stderr (default: on a terminal, for {PROGRESS_FROM} jobs or more)",
    )
    add_pretty(p)
    p.set_defaults(func=run)


@contextmanager
def _progress(enabled: bool, total: int) -> Iterator[Callable[[str], None]]:
    """A step function: advance the bar by one under a phase label (no-op when disabled)."""
    if not enabled:
        yield lambda _phase: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        "{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=False,
    ) as bar:
        tasks: dict[str, Any] = {}

        def step(phase: str) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.advance(tasks[phase])

        yield step


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    from apportion import kinds
    from apportion.workers.submit import SubmitFailed, printable, send, wait

    check_kind(args.kind)
    # Read as `apportion solve` reads (apportion/collector.py): the collector paused, and
    # what was read frozen, since it lives until the command ends. Vouched for by the
    # text: decoded by orjson, so plain JSON data (see JobSender.send).
    with collector_paused():
        jobs, is_array, bad, plain = read_vouched_jobs(args.kind, args.file)
        gc.freeze()
    if bad is not None:
        print_json(bad.as_dict(), args.pretty)
        return EXIT_REJECTED
    show = args.progress
    if show is None:
        show = sys.stderr.isatty() and len(jobs) >= PROGRESS_FROM
    config = settings()
    try:
        with _progress(bool(show), len(jobs)) as step:
            results = send(
                config,
                kinds.get(args.kind).task_name,
                jobs,
                connect_retries=args.connect_retries,
                timeout=args.timeout,
                step=step,
                started=started,
                plain=plain,
            )
            if not args.wait:
                ids = [r.id for r in results]
                print_json(ids if is_array else ids[0], args.pretty)
                return EXIT_OK
            # Printed compact, an answer goes out as its result record holds it.
            pretty = sys.stdout.isatty() if args.pretty is None else args.pretty
            envelopes = wait(results, args.timeout, step, config, raw=not pretty)
    except SubmitFailed as exc:
        print(f"apportion submit: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if is_array:
        print_json(printable(envelopes), args.pretty)
        return EXIT_OK
    print_json(printable(envelopes[0]), args.pretty)
    return STATUS_EXIT.get(str(envelopes[0].get("status")), EXIT_FAILED)
