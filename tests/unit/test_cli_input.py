"""Every command reading a file or stdin reads a bounded amount, and says which limit."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apportion.cli import main
from apportion.cli.common import InputTooLarge, engine_settings, read_input
from apportion.config.settings import get_settings
from apportion.engine_settings import EngineSettings


class EndlessStdin(io.StringIO):
    """A pipe that never ends: reading it to the end would never return."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    def read(self, size: int | None = -1) -> str:
        if size is None or size < 0:
            raise AssertionError("stdin read without a limit")
        self.asked.append(size)
        return "x" * size


@pytest.fixture(autouse=True)
def fresh_engine_settings() -> Iterator[None]:
    # The CLI reads its settings once per process (a cache): a limit a test sets in the
    # environment must not stay in the cache for the tests after it.
    engine_settings.cache_clear()
    yield
    engine_settings.cache_clear()


@pytest.fixture
def unreachable_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    # Refused before any connection: the Redis URL points nowhere.
    monkeypatch.setenv("APPORTION_REDIS_URL", "redis://127.0.0.1:1/0")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_reading_dev_zero_stops_after_the_limit() -> None:
    probe = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from apportion.cli.common import InputTooLarge, read_input\n"
        "try:\n"
        "    read_input('/dev/zero', max_chars=1000, limit_name='APPORTION_X')\n"
        "except InputTooLarge as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "/dev/zero exceeds the limit of 1000 characters (APPORTION_X)"


def test_a_file_of_exactly_the_limit_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text("é" * 10)

    assert read_input(str(path), max_chars=10, limit_name="X") == "é" * 10
    path.write_text("é" * 11)
    with pytest.raises(InputTooLarge, match="exceeds the limit of 10 characters"):
        read_input(str(path), max_chars=10, limit_name="X")


@pytest.mark.usefixtures("unreachable_redis")
def test_policy_set_refuses_an_endless_stdin_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("APPORTION_POLICY_MAX_BYTES", "2048")
    stdin = EndlessStdin()
    monkeypatch.setattr("sys.stdin", stdin)

    assert main(["policy", "set", "gpu", "-"]) == 2

    assert stdin.asked == [4 * 2048 + 1]
    assert "stdin exceeds the limit of 8192 characters (4 × APPORTION_POLICY_MAX_BYTES)" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize("command", ["solve", "submit"])
def test_solve_and_submit_reject_an_endless_stdin_naming_the_limit(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("APPORTION_LIMITS__MAX_PAYLOAD_BYTES", "5000")
    monkeypatch.setattr("apportion.cli.common.engine_settings", EngineSettings)
    stdin = EndlessStdin()
    monkeypatch.setattr("sys.stdin", stdin)

    assert main([command, "partition", "-", "--no-pretty"]) == 4

    assert stdin.asked == [5001]
    out = capsys.readouterr().out
    assert '"too_large"' in out
    assert "stdin exceeds the limit of 5000 bytes (APPORTION_LIMITS__MAX_PAYLOAD_BYTES)" in out


def test_explain_refuses_an_endless_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("APPORTION_LIMITS__MAX_PAYLOAD_BYTES", "5000")
    monkeypatch.setattr("apportion.cli.common.engine_settings", EngineSettings)
    monkeypatch.setattr("sys.stdin", EndlessStdin())

    assert main(["explain", "-"]) == 2
    assert "exceeds the limit of 5000 bytes" in capsys.readouterr().err


@pytest.mark.parametrize("count", ["0", "-1", "many"])
def test_policy_history_count_must_be_positive(
    count: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["policy", "history", "gpu", "--count", count])

    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --count" in err
    assert ("is not positive" if count != "many" else "is not a whole number") in err


def _solve(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    import json

    code = main(["solve", "partition", str(path), "--no-pretty"])
    return code, json.loads(capsys.readouterr().out)


def test_solve_on_a_file_that_is_not_utf8_answers_malformed_json_and_exits_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"a": "\xff"}')

    code, envelope = _solve(path, capsys)

    assert code == 4
    assert envelope["status"] == "rejected"
    assert envelope["error"]["code"] == "malformed_json"
    assert envelope["error"]["message"] == (
        f"$: not valid JSON: {path} is not UTF-8 text: invalid start byte (byte 0xff)"
    )


def test_solve_answers_a_reserved_object_as_the_workers_gate_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import base64
    import json

    from apportion.workers.broker.gate import GateRules, inspect
    from tests.conftest import load_example
    from tests.support.hostile_stream import call, item

    job = load_example("partition.json")
    job["schema"][1]["meta"] = {"__type__": "datetime", "__value__": "2020-01-01T00:00:00"}
    path = tmp_path / "reserved.json"
    path.write_text(json.dumps(job))
    raw, _ = item(call(job), task="apportion.partition", queue="partition")
    gated = inspect(raw, GateRules())
    assert base64.b64decode(gated.message["body"])  # delivered, with a verdict
    verdict = gated.verdict

    code, envelope = _solve(path, capsys)

    assert code == 4
    assert verdict is not None
    assert envelope["error"] == {k: verdict[k] for k in ("code", "message", "details")}
    assert envelope["error"]["code"] == "reserved_key"
    assert envelope["error"]["details"][0]["path"] == "schema[1].meta"


@pytest.mark.parametrize("jobs", ['["hi"]', None], ids=["a string", "a job encoded as a string"])
def test_solve_answers_a_string_in_an_array_as_no_job_never_decoding_it_again(
    jobs: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from tests.conftest import load_example

    text = jobs if jobs is not None else json.dumps([json.dumps(load_example("partition.json"))])
    path = tmp_path / "strings.json"
    path.write_text(text)

    code, envelopes = _solve(path, capsys)

    assert code == 0
    assert [e["error"]["code"] for e in envelopes] == ["invalid_job"]
    assert envelopes[0]["error"]["message"] == "$: a partition job must be a JSON object, got str"
