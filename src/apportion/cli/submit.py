"""``apportion submit KIND FILE [--wait]``: enqueue jobs on Redis, by task name.

Uses the producer app (apportion.workers.producer: the production configuration and
no task code), so it starts without importing any engine.
"""

from __future__ import annotations

import argparse
import sys
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
    read_jobs,
    redis_location,
    settings,
)

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
        help="with --wait: give up when no further result arrives for this many seconds "
        "(default 120)",
    )
    p.add_argument(
        "--connect-retries", type=int, default=3, help="broker connection attempts before giving up"
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
    check_kind(args.kind)
    jobs, is_array, bad = read_jobs(args.kind, args.file)
    if bad is not None:
        print_json(bad.as_dict(), args.pretty)
        return EXIT_REJECTED
    show = args.progress
    if show is None:
        show = sys.stderr.isatty() and len(jobs) >= PROGRESS_FROM
    with _progress(bool(show), len(jobs)) as step:
        results = _send(args, jobs, step)
        if results is None:
            return EXIT_FAILED
        if not args.wait:
            ids = [r.id for r in results]
            print_json(ids if is_array else ids[0], args.pretty)
            return EXIT_OK
        envelopes = _wait(results, args.timeout, step, redis_location(settings().backend))
    if envelopes is None:
        return EXIT_FAILED
    if is_array:
        print_json(envelopes, args.pretty)
        return EXIT_OK
    print_json(envelopes[0], args.pretty)
    return STATUS_EXIT.get(str(envelopes[0].get("status")), EXIT_FAILED)


def _send(args: argparse.Namespace, jobs: list[Any], step: Callable[[str], None]) -> Any:
    from kombu.exceptions import OperationalError

    from apportion import kinds
    from apportion.workers.producer import producer_app, sent_now

    config = settings()
    app = producer_app(config)
    # Waiting for answers must not outlast --timeout when Redis goes away meanwhile: the
    # result backend's reconnection gives up after about as many seconds.
    backend_options = app.conf.result_backend_transport_options
    policy = dict(backend_options.get("retry_policy") or {})
    policy["max_retries"] = max(1, min(int(policy.get("max_retries", 20)), int(args.timeout)))
    app.conf.result_backend_transport_options = {**backend_options, "retry_policy": policy}
    name = kinds.get(args.kind).task_name
    try:
        # Fail fast and clearly when Redis is down, instead of Celery's long retry loops.
        with app.connection_for_write() as conn:
            conn.ensure_connection(
                max_retries=args.connect_retries,
                interval_start=0.2,
                interval_step=0.5,
                interval_max=1.0,
            )
        results = []
        for job in jobs:
            results.append(app.send_task(name, args=[job], headers=sent_now()))
            step("sent")
    except (OperationalError, OSError, RuntimeError) as exc:
        from apportion.workers.redis.client import error_text

        print(
            f"apportion submit: cannot reach the broker at {redis_location(config.broker)}: "
            f"{error_text(exc)}",
            file=sys.stderr,
        )
        return None
    return results


def _wait(results: list[Any], timeout: float, step: Callable[[str], None], backend: str) -> Any:
    from celery.exceptions import TimeoutError as CeleryTimeout
    from kombu.exceptions import OperationalError
    from redis.exceptions import ConnectionError as RedisConnectionError

    envelopes: list[dict[str, Any]] = []
    try:
        for r in results:
            envelopes.append(r.get(timeout=timeout, propagate=True))
            step("answered")
    except CeleryTimeout:
        print(
            f"apportion submit: no result within {timeout:g} s "
            f"({len(envelopes)} of {len(results)} answered); is a worker running on the "
            "queue? (apportion health)",
            file=sys.stderr,
        )
        return None
    except (OperationalError, RedisConnectionError, OSError) as exc:
        from apportion.workers.redis.client import error_text

        reason = error_text(exc)
        print(f"apportion submit: lost the result backend at {backend}: {reason}", file=sys.stderr)
        return None
    except RuntimeError as exc:  # Celery's "Retry limit exceeded … result store backend"
        reason = " ".join(str(exc).split())
        print(f"apportion submit: lost the result backend at {backend}: {reason}", file=sys.stderr)
        return None
    except Exception as exc:  # the task itself failed (e.g. retries exhausted)
        print(f"apportion submit: task failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None
    return envelopes
