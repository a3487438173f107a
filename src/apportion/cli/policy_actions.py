"""``apportion policy``'s actions over the policy store (the parser is cli/policy.py).

Imported only when the command runs: it reaches Redis through apportion.workers, which
``apportion --help`` and ``solve`` never load.
"""

from __future__ import annotations

import argparse
import getpass
import json
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from apportion.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_REJECTED,
    CommandFailed,
    UsageError,
    read_input,
    redis_location,
)
from apportion.config.settings import Settings
from apportion.errors import Rejected, StoreUnavailable
from apportion.workers.policies.dryrun import (
    DryRun,
    RefusedByDryRun,
    dry_run,
    recent_entry,
    sources,
)
from apportion.workers.policies.store import DEFAULT_POOL, PolicyStore, PolicyVersion, diff
from apportion.workers.policies.text import policy_yaml, read_policy_yaml, when
from apportion.workers.redis.client import Client, client_for
from apportion.workers.runtime import failure_store, policy_store, recent_jobs

# A policy file's limit (read_policy_yaml's): four times the store's limit on the
# policy's JSON, as YAML with comments is longer.
POLICY_LIMIT = "4 × APPORTION_POLICY_MAX_BYTES"


def default_author() -> str:
    """``$USER@hostname``: who saved a version, when ``--author`` is not given."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no USER variable and no passwd entry (a bare container)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def run(args: argparse.Namespace, settings: Settings) -> int:
    actions: dict[str, Callable[[PolicyStore, argparse.Namespace], int]] = {
        "list": _list,
        "show": _show,
        "set": lambda store, args: _set(store, args, settings, client),
        "history": _history,
        "diff": _diff,
    }
    # A quick answer when Redis is down: no reconnect loop inside each call.
    client = client_for(settings, timeout=5.0, retries=1)
    try:
        return actions[args.action](policy_store(settings, client), args)
    except StoreUnavailable as exc:
        raise CommandFailed(
            f"cannot use the policy store at {redis_location(settings.redis_url)}: {exc}"
        ) from exc
    except Rejected as exc:
        for problem in exc.problems or ():
            print(f"apportion policy {args.action}: {problem.path}: {problem.message}",
                  file=sys.stderr)  # fmt: skip
        if not exc.problems:
            print(f"apportion policy {args.action}: {exc.message}", file=sys.stderr)
        return EXIT_REJECTED
    finally:
        client.close()


def _line(v: PolicyVersion) -> str:
    comment = f"  {v.comment}" if v.comment else ""
    return f"v{v.version}  {when(v.saved_at)}  {v.author}{comment}"


def _list(store: PolicyStore, args: argparse.Namespace) -> int:
    found = [(pool, store.current(pool)) for pool in store.pools()]
    current = [v for _, v in found if v is not None]
    if args.json:
        rows = [{k: val for k, val in v.as_dict().items() if k != "policy"} for v in current]
        print(json.dumps(rows, ensure_ascii=False))
        return EXIT_OK
    if not current:
        print("no policies in the store (a worker seeds `default` when it starts)",
              file=sys.stderr)  # fmt: skip
    width = max((len(v.pool) for v in current), default=0)
    for v in current:
        print(f"{v.pool:<{width}}  {_line(v)}")
    return EXIT_OK


def _get(store: PolicyStore, pool: str, version: int | None) -> PolicyVersion:
    found = store.current(pool) if version is None else store.version(pool, version)
    if found is not None:
        return found
    kept = store.kept(pool)
    if version is not None and kept:
        span = f"{kept[0]}-{kept[-1]}" if len(kept) > 1 else f"{kept[0]}"
        raise CommandFailed(f"pool {pool!r} has no version {version} (kept: {span})")
    hint = "" if pool == DEFAULT_POOL else f"; its jobs get the {DEFAULT_POOL!r} pool's policy"
    raise CommandFailed(f"pool {pool!r} has no policy in the store{hint}")


def _show(store: PolicyStore, args: argparse.Namespace) -> int:
    v = _get(store, args.pool, args.version)
    header = [
        f"# pool: {v.pool}",
        f"# version: {v.version}",
        f"# saved: {when(v.saved_at)} by {v.author}",
    ]
    if v.comment:
        header.append(f"# comment: {v.comment}")
    sys.stdout.write("\n".join(header) + "\n" + policy_yaml(v.policy))
    return EXIT_OK


def _set(store: PolicyStore, args: argparse.Namespace, settings: Settings, client: Client) -> int:
    text = read_input(args.file, max_chars=store.max_bytes * 4, limit_name=POLICY_LIMIT)
    try:
        policy = read_policy_yaml(text, max_chars=store.max_bytes * 4, source=args.file)
    except Rejected as exc:
        raise UsageError(exc.message) from exc
    report = _dry_run(store, args, settings, client, policy)
    # The report goes to stderr: stdout stays the one line scripts read.
    for line in report.lines():
        print(line, file=sys.stderr)
    if report.refuses and not args.force:
        refused = RefusedByDryRun(report).message
        print(f"apportion policy set: {refused} (--force saves it anyway)", file=sys.stderr)
        return EXIT_REJECTED
    saved = store.save(
        args.pool, policy, author=args.author or default_author(), comment=args.comment
    )
    print(f"{saved.pool}: saved version {saved.version}")
    return EXIT_OK


def _dry_run(
    store: PolicyStore,
    args: argparse.Namespace,
    settings: Settings,
    client: Client,
    policy: Any,
) -> DryRun:
    """The version tried on the pool's recent jobs and the examples (workers/policies/dryrun.py)."""
    examples = args.examples
    if examples is None and Path("examples").is_dir():
        examples = Path("examples")
    elif examples is not None and not examples.is_dir():
        raise UsageError(f"--examples {examples} is not a directory")
    recent = recent_jobs(settings, client).jobs() if settings.recent_jobs else []
    failures = failure_store(settings, client)

    def failure_counts(accounts: Sequence[str], window_hours: float) -> Mapping[str, int]:
        return failures.counts(accounts, window_hours, datetime.now(UTC))

    tried_on = sources(
        args.pool,
        recent=[recent_entry(job) for job in recent],
        examples=examples,
        limits=settings.limits,
        has_own_policy=lambda pool: store.current(pool) is not None,
    )
    return dry_run(args.pool, policy, tried_on, limits=settings.limits, failures=failure_counts)


def _history(store: PolicyStore, args: argparse.Namespace) -> int:
    versions = store.history(args.pool, limit=args.count)
    if args.json:
        print(json.dumps([v.as_dict() for v in versions], ensure_ascii=False))
        return EXIT_OK
    if not versions:
        raise CommandFailed(f"pool {args.pool!r} has no policy in the store")
    for v in versions:
        print(_line(v))
    return EXIT_OK


def _diff(store: PolicyStore, args: argparse.Namespace) -> int:
    a = _get(store, args.pool, args.v1)
    b = _get(store, args.pool, args.v2)
    sys.stdout.write(diff(a, b))
    return EXIT_OK


__all__ = ["EXIT_FAILED", "default_author", "run"]
