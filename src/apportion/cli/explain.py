"""``apportion explain [KIND] FILE``: a table and a picture of a result (or of a job,
solved first when a kind is given, as ``solve KIND FILE`` takes it, or with ``--kind``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from apportion.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    KIND_NAMES,
    UsageError,
    check_kind,
    engine_settings,
    read_payload,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "explain",
        help="table and picture of a launch_select or partition result (or job, with its kind)",
    )
    # An optional positional before FILE: `explain KIND FILE` as `solve KIND FILE`.
    p.add_argument(
        "positional_kind",
        nargs="?",
        metavar="KIND",
        help=f"solve FILE as a job of this kind first ({', '.join(KIND_NAMES)})",
    )
    p.add_argument("file", metavar="FILE", help="a result envelope, a job, or - for stdin")
    p.add_argument("--kind", help="the same as KIND")
    p.add_argument("--out", help="write the picture here (.png or .svg; needs the plot extra)")
    p.set_defaults(func=run)


def _envelope(args: argparse.Namespace) -> dict[str, Any]:
    from apportion.engine import parse_json_text
    from apportion.engine import run as run_job
    from apportion.engine_settings import engine_context
    from apportion.errors import Rejected

    try:
        data = parse_json_text(read_payload(args.file), engine_settings().limits)
    except Rejected as exc:
        raise UsageError(exc.message) from exc
    if not isinstance(data, dict):
        raise UsageError("explain takes one envelope (or one job with its kind)")
    if "status" in data and "kind" in data:
        return data
    kind = _kind(args)
    if kind:
        check_kind(kind)
        return run_job(kind, data, engine_context(engine_settings())).as_dict()
    raise UsageError(
        "FILE is not a result envelope; give its kind to solve it as a job: explain KIND FILE"
    )


def _kind(args: argparse.Namespace) -> str | None:
    """The kind given as ``KIND`` or ``--kind`` (both only when they agree)."""
    if args.positional_kind and args.kind and args.positional_kind != args.kind:
        raise UsageError(
            f"two kinds given: {args.positional_kind} and --kind {args.kind}; give one"
        )
    kind: str | None = args.positional_kind or args.kind
    return kind


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from apportion.explain import PlotUnavailable, explain

    envelope = _envelope(args)
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
