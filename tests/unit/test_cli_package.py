"""The `apportion` command's shape: a module per subcommand that imports nothing heavy
until it runs, and a worker command that hands every option to Celery."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from apportion.cli import DESCRIPTION, build_parser
from apportion.cli.common import EVENT_KIND_NAMES, KIND_HELP, KIND_NAMES
from apportion.cli.worker import worker_argv
from apportion.kinds.builtin import BUILTIN

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


def test_the_cli_names_the_built_in_kinds_of_the_registry_in_its_order() -> None:
    assert tuple(kind.name for kind in BUILTIN) == KIND_NAMES
    assert tuple(k.name for k in BUILTIN if k.summary.startswith("(event)")) == EVENT_KIND_NAMES
    assert KIND_HELP == (
        "job kind: auto_attach, guest_host_attach, heal_org, launch_select, partition, "
        "launch_outcome"
    )


def test_the_top_level_help_names_every_job_kind_and_the_event() -> None:
    assert DESCRIPTION.startswith(
        "Allocation worker: answers auto_attach, guest_host_attach, heal_org, launch_select "
        "and partition jobs and records launch_outcome events, "
    )
    assert build_parser().description == DESCRIPTION


@pytest.mark.parametrize("option", ["--host", "--address"])
def test_metrics_binds_the_address_given_as_host_or_as_its_alias_address(option: str) -> None:
    args = build_parser().parse_args(["metrics", option, "0.0.0.0"])

    assert args.host == "0.0.0.0"


def test_metrics_binds_the_loopback_address_by_default() -> None:
    assert build_parser().parse_args(["metrics"]).host == "127.0.0.1"


@pytest.mark.parametrize(
    ("command", "text"),
    [
        ("health", "unhealthy when a queue holds more jobs (default: no limit)"),
        ("health", "for its ack (seconds; default: no limit)"),
        ("submit", "broker connection attempts before giving up (default 3)"),
        ("events", "exit after N idle seconds (default: never, follow until Ctrl-C)"),
        ("metrics", "address to bind (127.0.0.1; --address is the same)"),
    ],
)
def test_the_help_of_an_option_states_its_default(
    command: str, text: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # one line per option: the text is not wrapped
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])

    assert text in capsys.readouterr().out


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
