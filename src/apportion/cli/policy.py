"""``apportion policy``: the policy store's pools and versions: list, show, set, history, diff.

YAML in and out: ``show`` prints a file ``set`` accepts as it is. ``set`` first tries
the version on the pool's recent jobs and the examples, and refuses one that rejects
every job it was tried on unless ``--force`` (workers/policies/dryrun.py). Exit codes:
0 done; 1 Redis unreachable, or no such pool or version; 2 usage; 4 the policy was
rejected (every problem printed with its field), or refused by the dry run.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive (at least 1)")
    return value


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "policy",
        help="the policy store: launch policies per pool, versioned (list, show, set, history, "
        "diff)",
        description="Launch policies per pool in the policy store; the pool `default` is the "
        "global default (docs/operations.md, 'The policy store').",
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = actions.add_parser("list", help="every pool with a policy and its current version")
    listing.add_argument("--json", action="store_true", help="a JSON array")

    show = actions.add_parser("show", help="a pool's policy as YAML (the current version)")
    show.add_argument("pool")
    show.add_argument("--version", type=int, metavar="N", help="this version instead")

    put = actions.add_parser("set", help="save a YAML policy file as the pool's next version")
    put.add_argument("pool")
    put.add_argument("file", help="a YAML (or JSON) list of modules; - reads stdin")
    put.add_argument("--comment", default="", help="why (shown in history)")
    put.add_argument("--author", help="who (default: $USER@hostname)")
    put.add_argument(
        "--force",
        action="store_true",
        help="save even when the dry run finds the version rejects every job it was tried on",
    )
    put.add_argument(
        "--examples",
        type=Path,
        metavar="DIR",
        help="folder whose launch_select*.json jobs the dry run tries too "
        "(default: ./examples if present)",
    )

    history = actions.add_parser("history", help="a pool's versions, newest first")
    history.add_argument("pool")
    history.add_argument("--count", type=positive, metavar="N", help="only the newest N")
    history.add_argument("--json", action="store_true", help="a JSON array, policies included")

    diff = actions.add_parser("diff", help="unified diff of two versions of a pool's policy")
    diff.add_argument("pool")
    diff.add_argument("v1", type=int)
    diff.add_argument("v2", type=int)

    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from apportion.cli.common import settings
    from apportion.cli.policy_actions import run as run_policy

    code: int = run_policy(args, settings())
    return code
