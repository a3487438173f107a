"""The `apportion` command's shape: a module per subcommand that imports nothing heavy
until it runs, and a worker command that hands every option to Celery."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from apportion import kinds
from apportion.cli.common import KIND_HELP
from apportion.cli.worker import worker_argv

HEAVY = ("celery", "kombu", "redis", "pydantic", "numpy", "scipy", "yaql", "rich")


def imported_after(code: str) -> set[str]:
    """Top-level modules loaded by running ``code`` in a fresh interpreter."""
    probe = f"import sys\n{code}\nimport json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout.splitlines()[-1]
    return {name.split(".")[0] for name in json.loads(out)}


def test_building_the_parser_for_help_imports_none_of_the_heavy_libraries() -> None:
    loaded = imported_after("from apportion.cli import build_parser; build_parser()")

    assert loaded.isdisjoint(HEAVY), loaded & set(HEAVY)


def test_submitting_imports_no_engine_library() -> None:
    # The producer side needs Celery and redis-py, never numpy, scipy or yaql.
    code = (
        "import os; os.environ['APPORTION_REDIS_URL'] = 'redis://127.0.0.1:1/0'\n"
        "from apportion.cli import main\n"
        "import io; sys.stdin = io.StringIO('{}')\n"
        "main(['submit', 'partition', '-', '--connect-retries', '0'])"
    )
    loaded = imported_after(code)

    assert "celery" in loaded
    assert loaded.isdisjoint({"numpy", "scipy", "yaql"})


def test_the_kind_help_names_every_built_in_kind() -> None:
    for name in kinds.names():
        assert name in KIND_HELP


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["-c", "4", "-Q", "partition"],
            ["worker", "-c", "4", "-Q", "partition", "--loglevel", "INFO"],
        ),
        (
            ["--queues=attach", "-l", "DEBUG", "--pool", "solo"],
            ["worker", "--queues=attach", "-l", "DEBUG", "--pool", "solo"],
        ),
        (
            ["-Qevents", "--max-tasks-per-child", "100", "--loglevel=WARNING"],
            ["worker", "-Qevents", "--max-tasks-per-child", "100", "--loglevel=WARNING"],
        ),
        ([], ["worker", "-Q", "attach,launch,partition,events", "--loglevel", "INFO"]),
    ],
)
def test_worker_options_reach_celery_untouched_with_two_defaults(
    argv: list[str], expected: list[str]
) -> None:
    assert worker_argv(argv, ("attach", "launch", "partition", "events")) == expected
