"""`apportion policy` against a real redis-server: YAML round trip, history, diff, errors.

The round trip runs the installed command; the rest call its ``main`` in this process
(the same code, without an interpreter start per call).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from apportion.cli import main
from apportion.config.settings import get_settings
from tests.acceptance.cli import apportion
from tests.conftest import load_example

pytestmark = pytest.mark.redis

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[Cli]:
    """``cli(*args, stdin=...) -> (exit code, stdout, stderr)`` against the test Redis."""
    monkeypatch.setenv("APPORTION_REDIS_URL", redis_url)
    get_settings.cache_clear()

    def run(*args: str, stdin: str = "") -> tuple[int, str, str]:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        code = main(["policy", *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    yield run
    get_settings.cache_clear()


FIRST = """\
# the gpu pool: private clusters first
- module: equal
- module: failure_penalty
  percent: 5
  window_hours: 6
- module: priority
  mode: strict
"""


def test_set_then_show_gives_yaml_that_set_takes_back_unchanged(
    redis_url: str, tmp_path: Path
) -> None:
    env = {"APPORTION_REDIS_URL": redis_url, "USER": "alice"}
    (tmp_path / "gpu.yaml").write_text(FIRST)

    saved = apportion("policy", "set", "gpu", str(tmp_path / "gpu.yaml"), "--comment", "first",
                      env=env)  # fmt: skip
    shown = apportion("policy", "show", "gpu", env=env)
    again = apportion("policy", "set", "gpu", "-", "--author", "bob", stdin=shown.stdout, env=env)
    shown_again = apportion("policy", "show", "gpu", "--version", "2", env=env)

    assert saved.returncode == 0, saved.stderr
    assert saved.stdout == "gpu: saved version 1\n"
    assert shown.returncode == 0, shown.stderr
    header, body = shown.stdout.split("- module", 1)
    assert header.splitlines()[:2] == ["# pool: gpu", "# version: 1"]
    assert " by alice@" in header
    assert "# comment: first" in header
    assert "- module" + body == (
        "- module: equal\n"
        "- module: failure_penalty\n"
        "  percent: 5\n"
        "  window_hours: 6\n"
        "- module: priority\n"
        "  mode: strict\n"
    )
    assert again.stdout == "gpu: saved version 2\n"
    assert shown_again.stdout.split("- module", 1)[1] == body


def test_history_is_newest_first_and_diff_shows_what_changed(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "v1.yaml").write_text(FIRST)
    (tmp_path / "v2.yaml").write_text(FIRST.replace("percent: 5", "percent: 10"))
    for name, comment in (("v1", "start"), ("v2", "harsher penalty")):
        code, _, err = cli("set", "gpu", str(tmp_path / f"{name}.yaml"), "--author", "carol@ops",
                           "--comment", comment)  # fmt: skip
        assert code == 0, err

    _, history, _ = cli("history", "gpu")
    _, as_json, _ = cli("history", "gpu", "--json")
    _, diff, _ = cli("diff", "gpu", "1", "2")
    _, listing, _ = cli("list")

    lines = history.splitlines()
    assert [line.split()[0] for line in lines] == ["v2", "v1"]
    assert lines[0].endswith("carol@ops  harsher penalty")
    assert [v["version"] for v in json.loads(as_json)] == [2, 1]
    assert diff == (
        "--- gpu v1\n"
        "+++ gpu v2\n"
        "@@ -1,6 +1,6 @@\n"
        " - module: equal\n"
        " - module: failure_penalty\n"
        "-  percent: 5\n"
        "+  percent: 10\n"
        "   window_hours: 6\n"
        " - module: priority\n"
        "   mode: strict\n"
    )
    assert listing.split()[:2] == ["gpu", "v2"]


def test_an_invalid_policy_exits_4_naming_each_field_and_saves_nothing(cli: Cli) -> None:
    bad = "- module: equal\n- module: failure_penalty\n  percent: 500\n  window_hours: 0\n"

    code, _, err = cli("set", "gpu", "-", stdin=bad)
    shown, _, shown_err = cli("show", "gpu")

    assert code == 4
    assert "policy[1].percent: Input should be less than or equal to 100" in err
    assert "policy[1].window_hours: Input should be greater than 0" in err
    assert shown == 1
    assert "pool 'gpu' has no policy in the store" in shown_err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("module: equal\n", "expected a list of policy modules"),
        ("- module: equal\n  x: [\n", "not YAML at line 3"),
        ("- &m {module: equal}\n- *m\n", "aliases (*name) are not accepted"),
    ],
)
def test_text_that_is_not_a_policy_list_is_a_usage_error(cli: Cli, text: str, message: str) -> None:
    code, _, err = cli("set", "gpu", "-", stdin=text)

    assert code == 2
    assert message in err


def test_a_missing_version_and_a_pool_without_a_policy_exit_1_saying_so(cli: Cli) -> None:
    cli("set", "gpu", "-", stdin="- module: equal\n")

    missing, _, err = cli("show", "gpu", "--version", "7")
    no_pool, _, no_pool_err = cli("history", "cpu")

    assert (missing, no_pool) == (1, 1)
    assert "pool 'gpu' has no version 7 (kept: 1)" in err
    assert "pool 'cpu' has no policy in the store" in no_pool_err


# ---- the dry run before a save (workers/policies/dryrun.py) --------------------------

DIVIDES_BY_ZERO = """\
- module: equal
- module: expression
  expression: $.cost_per_hour / 0
"""


def keep_recent(redis_url: str, *jobs: tuple[str, str | None]) -> None:
    """Have the workers' record of recent launch_select jobs hold ``(job_id, pool)`` jobs
    (the example job), oldest first, as a worker keeps them."""
    from apportion.config.settings import Settings
    from apportion.workers.runtime import recent_jobs

    record = recent_jobs(Settings(redis_url=redis_url))
    example = {k: v for k, v in load_example("launch_select.json").items() if k != "policy"}
    for job_id, pool in jobs:
        job = {**example, "job_id": job_id}
        if pool is not None:
            job["pool"] = pool
        assert record.remember(job)


def test_set_refuses_a_version_that_rejects_every_recent_job_of_its_pool_naming_the_count(
    cli: Cli, redis_url: str, tmp_path: Path
) -> None:
    keep_recent(redis_url, ("gpu-1", "gpu"), ("gpu-2", "gpu"))
    (tmp_path / "bad.yaml").write_text(DIVIDES_BY_ZERO)

    code, out, err = cli("set", "gpu", str(tmp_path / "bad.yaml"), "--examples", str(tmp_path))

    assert code == 4
    assert out == ""
    assert err.splitlines()[:3] == [
        "dry run on pool 'gpu': ok on 0, rejected by 2 of 2 deployables",
        "  rejected recent: gpu-2: bad_expression: policy[1].expression: yaql evaluation "
        "failed: ZeroDivisionError: float division by zero",
        "  rejected recent: gpu-1: bad_expression: policy[1].expression: yaql evaluation "
        "failed: ZeroDivisionError: float division by zero",
    ]
    assert "not saved: this version rejects all 2 deployables it was tried on" in err
    assert cli("history", "gpu")[0] == 1  # nothing saved


def test_set_with_force_saves_a_version_the_dry_run_refuses_and_still_shows_the_report(
    cli: Cli, redis_url: str, tmp_path: Path
) -> None:
    keep_recent(redis_url, ("gpu-1", "gpu"))
    (tmp_path / "bad.yaml").write_text(DIVIDES_BY_ZERO)

    code, out, err = cli(
        "set", "gpu", str(tmp_path / "bad.yaml"), "--examples", str(tmp_path), "--force"
    )

    assert (code, out) == (0, "gpu: saved version 1\n")
    assert err.splitlines()[0] == "dry run on pool 'gpu': ok on 0, rejected by 1 of 1 deployables"


def test_the_dry_run_tries_the_pools_own_recent_jobs_and_the_examples(
    cli: Cli, redis_url: str, tmp_path: Path
) -> None:
    from tests.conftest import EXAMPLES

    keep_recent(redis_url, ("gpu-1", "gpu"), ("cpu-1", "cpu"), ("no-pool", None))
    (tmp_path / "gpu.yaml").write_text(FIRST)

    code, out, err = cli("set", "gpu", str(tmp_path / "gpu.yaml"), "--examples", str(EXAMPLES))

    assert (code, out) == (0, "gpu: saved version 1\n")
    assert err.splitlines() == [
        "dry run on pool 'gpu': ok on 3, rejected by 0 of 3 deployables",
        "  ok       recent: gpu-1",
        "  ok       examples/launch_select.candidates.json",
        "  ok       examples/launch_select.json",
    ]


def test_the_default_pools_dry_run_tries_jobs_of_no_pool_and_of_pools_without_a_policy(
    cli: Cli, redis_url: str, tmp_path: Path
) -> None:
    (tmp_path / "gpu.yaml").write_text(FIRST)
    assert cli("set", "gpu", str(tmp_path / "gpu.yaml"), "--examples", str(tmp_path))[0] == 0
    keep_recent(redis_url, ("gpu-1", "gpu"), ("cpu-1", "cpu"), ("no-pool", None))
    (tmp_path / "bad.yaml").write_text(DIVIDES_BY_ZERO)

    code, _, err = cli("set", "default", str(tmp_path / "bad.yaml"), "--examples", str(tmp_path))

    assert code == 4
    assert [line.split(":")[0] for line in err.splitlines()[1:3]] == [
        "  rejected recent",
        "  rejected recent",
    ]
    assert "recent: no-pool" in err
    assert "recent: cpu-1" in err
    assert "gpu-1" not in err


def test_a_version_tried_on_nothing_is_saved_and_says_so(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(DIVIDES_BY_ZERO)

    code, out, err = cli("set", "gpu", str(tmp_path / "bad.yaml"), "--examples", str(tmp_path))

    assert (code, out) == (0, "gpu: saved version 1\n")
    assert err == "dry run: no recent job of pool 'gpu' and no example to try it on\n"
