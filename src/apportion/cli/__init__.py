"""The ``apportion`` command: one small module per subcommand.

Building the parser imports every command module, so each imports only the standard
library at module level and takes what it needs (the engine, Celery, redis-py, rich)
inside the function that runs it, so ``apportion --help`` and ``apportion submit``
start in well under a second.

Exit codes: 0 ok, 3 infeasible, 4 rejected (``solve`` and ``submit --wait`` of one
job; for a JSON array of jobs, 0 unless the command itself failed); 1 the command
failed (Redis unreachable, a timeout, an unhealthy system for ``health``); 2 usage
error (unknown kind, unreadable file).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from apportion.cli.common import (
    EVENT_KIND_NAMES,
    EXIT_FAILED,
    EXIT_USAGE,
    JOB_KIND_NAMES,
    CommandFailed,
    UsageError,
)

# Subcommand → module in this package, in the order `apportion --help` lists them.
COMMANDS: dict[str, str] = {
    "solve": "solve",
    "submit": "submit",
    "worker": "worker",
    "health": "health",
    "events": "events",
    "dead-letters": "dead_letters",
    "policy": "policy",
    "metrics": "metrics",
    "schema": "schema",
    "explain": "explain",
    "demo": "demo",
    "studio": "studio",
}


def _listed(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


DESCRIPTION = (
    f"Allocation worker: answers {_listed(JOB_KIND_NAMES)} jobs and records "
    f"{_listed(EVENT_KIND_NAMES)} events, in-process (solve) or through Redis and Celery "
    "workers (submit, worker). Contract: docs/contract.md; examples: examples/."
)


class _Version(argparse.Action):
    """``--version``: apportion's version and the versions it runs with, read lazily."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print versions and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib.metadata import PackageNotFoundError, version

        from apportion import __version__

        parts = [f"Python {sys.version.split()[0]}"]
        for dist in ("celery", "kombu", "redis", "pydantic"):
            try:
                parts.append(f"{dist} {version(dist)}")
            except PackageNotFoundError:  # pragma: no cover - a broken install
                parts.append(f"{dist} missing")
        print(f"apportion {__version__} ({', '.join(parts)})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="apportion",
        description=DESCRIPTION,
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS.values():
        importlib.import_module(f"apportion.cli.{module}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["worker"]:
        # Everything after `worker` is Celery's (-c 4, -Q partition, --pool, -n …):
        # handed over untouched, never parsed (and mangled) by argparse here.
        from apportion.cli.worker import run_worker

        return run_worker(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except UsageError as exc:
        print(f"apportion {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CommandFailed as exc:
        print(f"apportion {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    return code


__all__ = ["COMMANDS", "DESCRIPTION", "build_parser", "main"]
