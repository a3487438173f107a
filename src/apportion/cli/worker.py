"""``apportion worker [CELERY WORKER OPTIONS]``: a Celery worker with apportion's app.

Every option is Celery's own and is passed through untouched (``-c 4``, ``-Q
partition``, ``--pool``, ``-n``, ``--max-tasks-per-child`` …): ``apportion worker -c 4
-Q partition`` is ``celery -A apportion.workers.app worker -c 4 -Q partition``. Only
two defaults are added when not given: every queue of every registered kind, and
``--loglevel INFO``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from apportion.cli.common import EXIT_OK

HELP = (
    "run a Celery worker; every option after `worker` is celery worker's own "
    "(default -Q: every queue, --loglevel INFO)"
)


def add_parser(sub: Any) -> None:
    # Listed in `apportion --help`; main() hands `worker` to run_worker before argparse.
    sub.add_parser("worker", help=HELP, add_help=False)


def _given(argv: Sequence[str], *names: str) -> bool:
    """Whether ``argv`` sets one of the options ``names`` (``-Q x``, ``-Qx``, ``--queues=x``)."""
    for arg in argv:
        for name in names:
            if (
                arg == name
                or arg.startswith(name + "=")
                or (len(name) == 2 and arg.startswith(name) and not arg.startswith("--"))
            ):
                return True
    return False


def worker_argv(argv: Sequence[str], queues: Sequence[str]) -> list[str]:
    """Celery's argv for ``apportion worker ARGV``: the user's options, then our defaults."""
    out = ["worker", *argv]
    if not _given(argv, "-Q", "--queues"):
        out += ["-Q", ",".join(queues)]
    if not _given(argv, "-l", "--loglevel"):
        out += ["--loglevel", "INFO"]
    return out


def run_worker(argv: Sequence[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(f"apportion worker: {HELP}.\nCelery's worker options follow.\n", flush=True)
    from apportion import kinds
    from apportion.cli.common import EXIT_USAGE, UsageError, settings

    try:
        settings()  # a misconfiguration is one clear line, before Celery starts
    except UsageError as exc:
        print(f"apportion worker: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from apportion.workers.app import app

    app.worker_main(worker_argv(argv, kinds.queues()))
    sys.stdout.flush()
    return EXIT_OK
