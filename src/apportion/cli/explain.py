"""``apportion explain FILE``: a table and a picture of a result (or of a job, solved)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from apportion.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    check_kind,
    engine_settings,
    read_payload,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("explain", help="table and picture of a launch_select or partition result")
    p.add_argument("file", help="a result envelope (or a job, with --kind), or - for stdin")
    p.add_argument("--kind", help="solve FILE as a job of this kind first")
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
        raise UsageError("explain takes one envelope (or one job with --kind)")
    if "status" in data and "kind" in data:
        return data
    if args.kind:
        check_kind(args.kind)
        return run_job(args.kind, data, engine_context(engine_settings())).as_dict()
    raise UsageError("FILE is not a result envelope; pass --kind to solve it as a job")


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
