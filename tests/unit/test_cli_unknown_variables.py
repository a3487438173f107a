"""``apportion solve`` and ``explain`` refuse a misspelt ``APPORTION_*`` variable, as a
worker does, rather than answer with the setting's default."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from apportion.cli import main
from apportion.cli.common import engine_settings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

COMMANDS = {
    "solve": ["solve", "partition", str(EXAMPLES / "partition.json")],
    "explain": ["explain", str(EXAMPLES / "partition.envelope.json")],
    "explain --kind": ["explain", "--kind", "partition", str(EXAMPLES / "partition.json")],
}


@pytest.fixture(autouse=True)
def fresh_settings() -> Iterator[None]:
    # The CLI reads its settings once per process; each test reads them afresh.
    engine_settings.cache_clear()
    yield
    engine_settings.cache_clear()


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("variable", "closest"),
    [
        ("APPORTION_REDIS_ULR", "APPORTION_REDIS_URL"),
        ("APPORTION_ALLOW_INLINE_POLICYY", "APPORTION_ALLOW_INLINE_POLICY"),
        ("APPORTION_LIMITS__MAX_POLS", "APPORTION_LIMITS__MAX_POOLS"),
    ],
)
def test_a_misspelt_variable_is_a_usage_error_naming_the_closest_known_name(
    command: str,
    variable: str,
    closest: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(variable, "1")

    assert main(COMMANDS[command]) == 2

    out, err = capsys.readouterr()
    assert out == ""
    name = command.split()[0]
    assert err == (
        f"apportion {name}: invalid APPORTION_* configuration: unknown environment variable "
        f"{variable}; did you mean {closest}?\n"
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_a_workers_environment_is_valid_for_solve_and_explain(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Settings only a worker reads are known names here too, though solve ignores them.
    monkeypatch.setenv("APPORTION_REDIS_URL", "redis://cache:6379/0")
    monkeypatch.setenv("APPORTION_TIME_LIMITS__PARTITION__HARD", "120")
    monkeypatch.setenv("APPORTION_SIMULATED_FAILURE_RATES__EC2", "0.5")
    monkeypatch.setenv("APPORTION_LOG_FORMAT", "json")

    assert main(COMMANDS[command]) == 0

    assert "APPORTION" not in capsys.readouterr().err


def test_solve_rejects_a_misspelt_field_where_the_environment_says_unknown_fields_reject(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    job = json.loads((EXAMPLES / "partition.json").read_text())
    job["schema"][3]["min_szie"] = 5
    (tmp_path / "job.json").write_text(json.dumps(job))
    monkeypatch.setenv("APPORTION_UNKNOWN_FIELDS", "reject")

    status = main(["solve", "partition", str(tmp_path / "job.json")])

    envelope = json.loads(capsys.readouterr().out)
    assert (envelope["status"], envelope["error"]["code"]) == ("rejected", "unknown_field")
    assert envelope["error"]["details"] == [
        {
            "path": "schema[3].min_szie",
            "message": "unknown field 'min_szie'; did you mean 'min_size'?",
        }
    ]
    assert status != 0


def test_an_unknown_fields_setting_other_than_warn_or_reject_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("APPORTION_UNKNOWN_FIELDS", "rejct")

    assert main(COMMANDS["solve"]) == 2

    assert "APPORTION_UNKNOWN_FIELDS: Input should be 'warn' or 'reject'" in capsys.readouterr().err
