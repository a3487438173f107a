"""The ``apportion`` command.

``solve`` runs the engine in-process; ``submit``, ``worker``, ``events``, ``dead-letters``
and ``demo`` reach the broker, importing Celery/Redis lazily inside their functions so the
engine-only commands start fast and the engine package stays free of I/O imports
at module level (this is the one module allowed to reach the broker).

Exit codes (SPEC.md §4): 0 ok, 3 infeasible, 4 rejected; for a JSON array of jobs,
0 unless the command itself failed. 1 = the command failed (broker unreachable,
timeout), 2 = usage error (unknown kind, unreadable file).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apportion import kinds
from apportion.errors import Rejected

if TYPE_CHECKING:
    from apportion.contracts import Envelope

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INFEASIBLE = 3
EXIT_REJECTED = 4

STATUS_EXIT = {"ok": EXIT_OK, "infeasible": EXIT_INFEASIBLE, "rejected": EXIT_REJECTED}


class UsageError(Exception):
    """A mistake in the command line; exit 2 with the message."""


def _read_input(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    path = Path(source)
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {source}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"{source} is not UTF-8 text: {exc}") from exc


def _print_json(data: Any, pretty: bool | None = None) -> None:
    """Write ``data`` as JSON: compact for programs, indented on a terminal or when asked."""
    from apportion.codec import encode

    if pretty is None:
        pretty = sys.stdout.isatty()
    sys.stdout.flush()
    sys.stdout.buffer.write(encode(data, pretty=pretty) + b"\n")
    sys.stdout.buffer.flush()


def _settings() -> Any:
    """The worker's settings (commands that reach Redis)."""
    from apportion.config.settings import get_settings

    try:
        return get_settings()
    except ValueError as exc:  # pydantic ValidationError is a ValueError
        raise UsageError(f"invalid APPORTION_* configuration: {exc}") from exc


def _engine_settings() -> Any:
    """What answering a job in-process needs (solve, explain): no service packages."""
    from apportion.engine_settings import EngineSettings

    try:
        return EngineSettings()
    except ValueError as exc:
        raise UsageError(f"invalid APPORTION_* configuration: {exc}") from exc


def _jobs_from_text(kind: str, text: str) -> tuple[list[Any], bool, Envelope | None]:
    """Parse the input: (jobs, was_array, rejection envelope if the text is not JSON)."""
    from apportion.engine import parse_json_text, run

    settings = _engine_settings()
    try:
        data = parse_json_text(text, settings.limits)
    except Rejected:
        return [], False, run(kind, text)
    if isinstance(data, list):
        return data, True, None
    return [data], False, None


def _check_kind(kind: str) -> None:
    if kind not in kinds.REGISTRY:
        raise UsageError(f"unknown kind {kind!r}; choose one of: {', '.join(kinds.names())}")


# ---- solve --------------------------------------------------------------------------


def cmd_solve(args: argparse.Namespace) -> int:
    from apportion.engine import run
    from apportion.engine_settings import engine_context

    settings = _engine_settings()  # first: it loads a deployment's own kinds
    _check_kind(args.kind)
    text = _read_input(args.file)
    jobs, is_array, bad = _jobs_from_text(args.kind, text)
    if bad is not None:
        _print_json(bad.as_dict(), args.pretty)
        return EXIT_REJECTED
    envelopes = [run(args.kind, job, engine_context(settings)) for job in jobs]
    if is_array:
        _print_json([e.as_dict() for e in envelopes], args.pretty)
        return EXIT_OK
    _print_json(envelopes[0].as_dict(), args.pretty)
    return STATUS_EXIT[envelopes[0].status]


# ---- submit -------------------------------------------------------------------------


def cmd_submit(args: argparse.Namespace) -> int:
    from celery.exceptions import TimeoutError as CeleryTimeout
    from kombu.exceptions import OperationalError

    _check_kind(args.kind)
    text = _read_input(args.file)
    jobs, is_array, bad = _jobs_from_text(args.kind, text)
    if bad is not None:
        _print_json(bad.as_dict(), args.pretty)
        return EXIT_REJECTED

    from apportion.workers.app import app

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
        results = [app.send_task(name, args=[job]) for job in jobs]
    except (OperationalError, OSError, RuntimeError) as exc:
        print(f"apportion submit: cannot reach the broker: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if not args.wait:
        ids = [r.id for r in results]
        _print_json(ids if is_array else ids[0], args.pretty)
        return EXIT_OK
    envelopes: list[dict[str, Any]] = []
    try:
        for r in results:
            envelopes.append(r.get(timeout=args.timeout, propagate=True))
    except CeleryTimeout:
        print(f"apportion submit: no result within {args.timeout:g} s", file=sys.stderr)
        return EXIT_FAILED
    except OperationalError as exc:
        print(f"apportion submit: lost the result backend: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # the task itself failed (e.g. retries exhausted)
        print(f"apportion submit: task failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if is_array:
        _print_json(envelopes, args.pretty)
        return EXIT_OK
    _print_json(envelopes[0], args.pretty)
    return STATUS_EXIT.get(str(envelopes[0].get("status")), EXIT_FAILED)


# ---- worker / events / demo / schema -------------------------------------------------


def cmd_worker(args: argparse.Namespace) -> int:
    from apportion.workers.app import app

    argv = ["worker", "-Q", args.queues, "--loglevel", args.loglevel, *args.celery_args]
    app.worker_main(argv)
    return EXIT_OK


def cmd_events(args: argparse.Namespace) -> int:
    from apportion.workers.results.events_cli import follow

    return follow(
        kinds=args.kind or list(kinds.names()),
        group=args.group,
        consumer=args.consumer,
        count=args.count,
        as_json=args.json,
        idle_exit=args.idle_exit,
        claim_idle_ms=args.claim_idle_ms,
    )


def cmd_dead_letters(args: argparse.Namespace) -> int:
    from apportion.workers.broker.dead_letters_cli import run

    return run(
        count=args.count,
        reason=args.reason,
        as_json=args.json,
        show=args.show,
        requeue=args.requeue,
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from apportion.workers.demo.runner import run_demo

    return run_demo(as_json=args.json)


def cmd_explain(args: argparse.Namespace) -> int:
    from rich.console import Console

    from apportion.engine import parse_json_text, run
    from apportion.engine_settings import engine_context
    from apportion.explain import PlotUnavailable, explain

    text = _read_input(args.file)
    try:
        data = parse_json_text(text, _engine_settings().limits)
    except Rejected as exc:
        raise UsageError(exc.message) from exc
    if not isinstance(data, dict):
        raise UsageError("explain takes one envelope (or one job with --kind)")
    if "status" in data and "kind" in data:
        envelope: dict[str, Any] = data
    elif args.kind:
        _check_kind(args.kind)
        envelope = run(args.kind, data, engine_context(_engine_settings())).as_dict()
    else:
        raise UsageError("FILE is not a result envelope; pass --kind to solve it as a job")
    out = Path(args.out) if args.out else None
    if out is not None and out.suffix.lower() not in (".png", ".svg"):
        raise UsageError("--out must end in .png or .svg")
    try:
        written = explain(envelope, out, Console())
    except PlotUnavailable as exc:
        print(f"apportion explain: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if written is not None:
        print(f"wrote {written}")
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from apportion.schemas import job_schema, result_schema

    _check_kind(args.kind)
    _print_json(result_schema(args.kind) if args.result else job_schema(args.kind), args.pretty)
    return EXIT_OK


# ---- parser -------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="apportion",
        description="Allocation worker: auto-attach, launch selection, disk partitioning.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("solve", help="run the engine on a job file and print the envelope")
    p.add_argument("kind", help=f"one of: {', '.join(kinds.names())}")
    p.add_argument("file", help="job JSON file, or - for stdin (a JSON array runs each job)")
    p.set_defaults(func=cmd_solve)

    p = sub.add_parser("submit", help="enqueue a job on the configured Redis")
    p.add_argument("kind")
    p.add_argument("file")
    p.add_argument("--wait", action="store_true", help="wait and print the result envelope(s)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait (with --wait)")
    p.add_argument(
        "--connect-retries", type=int, default=3, help="broker connection attempts before giving up"
    )
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("worker", help="run a Celery worker (extra args go to celery)")
    p.add_argument("-Q", "--queues", default=",".join(kinds.queues()))
    p.add_argument("--loglevel", default="INFO")
    p.add_argument("celery_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("events", help="follow the result streams with a consumer group")
    p.add_argument("--kind", action="append", choices=kinds.names(), help="repeatable; default all")
    p.add_argument("--group", default=None, help="consumer group (default apportion-subscribers)")
    p.add_argument("--consumer", default=None, help="consumer name (default host-pid)")
    p.add_argument("--count", type=int, default=None, help="exit after this many events")
    p.add_argument("--idle-exit", type=float, default=None, help="exit after N idle seconds")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument(
        "--claim-idle-ms",
        type=int,
        default=60_000,
        help="take over other consumers' entries left unacknowledged this long (default 60000)",
    )
    p.set_defaults(func=cmd_events)

    p = sub.add_parser(
        "dead-letters", help="messages the workers would not run: list, show or requeue one"
    )
    p.add_argument("--count", type=int, default=50, help="how many, newest first (default 50)")
    p.add_argument("--reason", help="only this reason (e.g. quarantined, not_json)")
    p.add_argument("--json", action="store_true", help="a JSON array, messages included")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--show", metavar="ID", help="print one entry with its message")
    group.add_argument(
        "--requeue", metavar="ID", help="push the entry's message back onto its queue"
    )
    p.set_defaults(func=cmd_dead_letters)

    p = sub.add_parser("demo", help="run the embedded demo (no Redis needed)")
    p.add_argument("--json", action="store_true", help="print envelopes and events as JSON")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("explain", help="table and picture of a launch_select or partition result")
    p.add_argument("file", help="a result envelope (or a job, with --kind), or - for stdin")
    p.add_argument("--kind", help="solve FILE as a job of this kind first")
    p.add_argument("--out", help="write the picture here (.png or .svg; needs the plot extra)")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("schema", help="print the JSON Schema of a job kind")
    p.add_argument("kind")
    p.add_argument("--result", action="store_true", help="the result envelope's schema instead")
    p.set_defaults(func=cmd_schema)
    for name in ("solve", "submit", "schema"):
        sub.choices[name].add_argument(
            "--pretty",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="indent the JSON (default: only when writing to a terminal)",
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except UsageError as exc:
        print(f"apportion {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
