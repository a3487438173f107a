"""The `apportion` command: exit codes and output shapes (README, "Run it")."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from apportion import kinds
from tests.acceptance.cli import apportion, output_json
from tests.conftest import EXAMPLES, load_example, load_reference


def partition_sizes(result: dict[str, object]) -> dict[tuple[str, str], int]:
    return {
        (d["disk_id"], s["space_id"]): s["size"]  # type: ignore[index]
        for d in result["disks"]  # type: ignore[attr-defined]
        for s in d["spaces"]  # type: ignore[index]
        if s["size"]  # type: ignore[index]
    }


def test_solve_prints_the_reference_answer_for_the_partition_example() -> None:
    proc = apportion("solve", "partition", str(EXAMPLES / "partition.json"))

    assert proc.returncode == 0, proc.stderr
    env = output_json(proc)
    assert env["status"] == "ok"
    assert env["kind"] == "partition"
    assert env["job_id"] == "example-partition-1"
    expected = load_reference("partition.json")
    assert partition_sizes(env["result"]) == partition_sizes(expected)


def test_solve_reads_stdin_and_a_json_array_gives_an_array_in_order_with_exit_zero() -> None:
    job = load_example("partition.json")
    bad = {"job_id": "bad", "schema": [], "hardware": {"disks": []}}
    proc = apportion("solve", "partition", "-", stdin=json.dumps([job, bad, job]))

    assert proc.returncode == 0, proc.stderr
    envs = output_json(proc)
    assert [e["status"] for e in envs] == ["ok", "rejected", "ok"]
    assert [e["job_id"] for e in envs] == ["example-partition-1", "bad", "example-partition-1"]


def test_an_array_streamed_job_by_job_is_the_compact_array_byte_for_byte() -> None:
    job = load_example("partition.json")
    bad = {"job_id": "bad", "schema": [], "hardware": {"disks": []}}
    proc = apportion("solve", "partition", "-", stdin=json.dumps([job, bad]))

    assert proc.returncode == 0, proc.stderr
    envs = output_json(proc)
    for env in envs:  # timing is the only field that differs between runs
        env["elapsed_ms"] = 0
    expected = [apportion_json(job), apportion_json(bad)]
    assert envs == expected
    assert proc.stdout.startswith('[{"job_id":"example-partition-1","kind":"partition"')
    assert proc.stdout.count("\n") == 1


def apportion_json(job: dict[str, object]) -> dict[str, object]:
    """One job solved on its own, with its timing zeroed."""
    env = output_json(apportion("solve", "partition", "-", stdin=json.dumps(job)))
    env["elapsed_ms"] = 0
    assert isinstance(env, dict)
    return env


def test_solve_exits_4_with_a_rejected_envelope_naming_the_fields(tmp_path: Path) -> None:
    job = tmp_path / "bad.json"
    job.write_text(
        json.dumps(
            {
                "schema": [{"id": "a", "type": "lv", "size": -1}],
                "hardware": {"disks": [{"id": "sda", "size": 100}]},
            }
        )
    )
    proc = apportion("solve", "partition", str(job))

    assert proc.returncode == 4
    env = output_json(proc)
    assert env["status"] == "rejected"
    assert env["error"]["details"]
    assert all(d["path"].startswith("schema[0]") for d in env["error"]["details"])
    assert "Traceback" not in proc.stdout + proc.stderr


def test_solve_exits_3_when_the_disks_are_too_small() -> None:
    job = {
        "schema": [
            {"id": "a", "type": "partition", "min_size": 80},
            {"id": "b", "type": "partition", "min_size": 30},
        ],
        "hardware": {"disks": [{"id": "sda", "size": 100}]},
    }
    proc = apportion("solve", "partition", "-", stdin=json.dumps(job))

    assert proc.returncode == 3, proc.stdout
    env = output_json(proc)
    assert env["status"] == "infeasible"
    assert env["error"]["message"]


def test_solve_answers_text_that_is_not_json_with_a_rejected_envelope() -> None:
    proc = apportion("solve", "partition", "-", stdin="{not json")

    assert proc.returncode == 4
    assert output_json(proc)["error"]["code"] == "malformed_json"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("solve", "horoscope", "-"), "unknown kind"),
        (("solve", "partition", "/nonexistent/job.json"), "cannot read"),
    ],
)
def test_usage_mistakes_exit_2_with_a_message(args: tuple[str, ...], message: str) -> None:
    proc = apportion(*args, stdin="{}")

    assert proc.returncode == 2
    assert message in proc.stderr


def test_schema_prints_the_job_schema_and_with_result_the_envelope_schema() -> None:
    job = output_json(apportion("schema", "partition"))
    result = output_json(apportion("schema", "launch_select", "--result"))

    assert "schema" in job["properties"]
    assert "hardware" in job["properties"]
    assert result["properties"]["status"]["enum"] == ["ok", "infeasible", "rejected"]
    assert "LaunchSelectResult" in result["$defs"]


def test_solving_a_job_locally_imports_no_service_package_and_no_broker_client() -> None:
    probe = (
        "import sys; from apportion.cli import main; "
        f"main(['solve', 'partition', {str(EXAMPLES / 'partition.json')!r}]); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('celery', 'kombu', 'redis') or m.startswith(('apportion.workers', "
        "'apportion.tasks', 'apportion.config'))), file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)

    assert proc.stderr.strip().splitlines()[-1] == "[]"


def test_version_names_apportion_and_what_it_runs_with() -> None:
    proc = apportion("--version")

    assert proc.returncode == 0
    assert proc.stdout.startswith("apportion 0.1.0 (Python 3.")
    assert "celery 5." in proc.stdout


def test_schema_all_writes_every_kinds_job_and_envelope_schema(tmp_path: Path) -> None:
    proc = apportion("schema", "--all", "--out", str(tmp_path))

    assert proc.returncode == 0, proc.stderr
    written = sorted(p.name for p in tmp_path.iterdir())
    assert "partition.json" in written
    assert "partition.result.json" in written
    # A job schema and an envelope schema for each built-in kind.
    assert written == sorted(
        f"{k}{end}" for k in kinds.names() for end in (".json", ".result.json")
    )
    assert "heal_org.result.json" in written
    assert json.loads((tmp_path / "partition.result.json").read_text())["title"] == (
        "partition result envelope"
    )


def test_schema_list_names_each_kinds_task_and_queue() -> None:
    lines = apportion("schema", "--list").stdout.splitlines()

    partition = next(line for line in lines if line.startswith("partition "))
    assert "apportion.partition" in partition
    assert "queue partition" in partition


UNREACHABLE = {"APPORTION_REDIS_URL": "redis://user:s3cret@127.0.0.1:1/0"}


def test_events_with_idle_exit_gives_up_with_a_message_when_redis_is_down() -> None:
    started = time.monotonic()
    proc = apportion("events", "--idle-exit", "2", env=UNREACHABLE, timeout=60)

    assert proc.returncode == 1
    assert time.monotonic() - started < 20
    assert "cannot reach Redis at redis://user:***@127.0.0.1:1/0" in proc.stderr
    assert "s3cret" not in proc.stderr
    assert "Traceback" not in proc.stderr


def test_events_asked_to_exit_on_disconnect_gives_up_after_its_connect_timeout() -> None:
    proc = apportion(
        "events", "--exit-on-disconnect", "--connect-timeout", "1", env=UNREACHABLE, timeout=60
    )

    assert proc.returncode == 1
    assert "cannot reach Redis" in proc.stderr


def test_health_exits_1_within_seconds_when_redis_is_down() -> None:
    started = time.monotonic()
    proc = apportion("health", env=UNREACHABLE, timeout=60)

    assert proc.returncode == 1
    assert time.monotonic() - started < 10
    assert proc.stdout.startswith("UNHEALTHY")
    assert "Redis unreachable at redis://user:***@127.0.0.1:1/0" in proc.stdout
    assert "s3cret" not in proc.stdout


def test_health_json_is_one_object_saying_unhealthy() -> None:
    report = output_json(apportion("health", "--json", env=UNREACHABLE))

    assert report["healthy"] is False
    assert report["redis"]["ok"] is False


def test_health_refuses_a_queue_no_kind_runs_on() -> None:
    proc = apportion("health", "--queue", "nope", env=UNREACHABLE)

    assert proc.returncode == 2
    assert "unknown queue" in proc.stderr


def test_policy_exits_1_with_a_message_when_redis_is_down() -> None:
    started = time.monotonic()
    proc = apportion("policy", "list", env={"APPORTION_REDIS_URL": "redis://:s3cret@127.0.0.1:1/0"})

    assert proc.returncode == 1
    assert proc.stderr.startswith("apportion policy: cannot use the policy store at redis://:***@")
    assert "s3cret" not in proc.stderr
    assert time.monotonic() - started < 20


def test_metrics_once_reports_redis_down_and_exits_1() -> None:
    proc = apportion("metrics", "--once", env=UNREACHABLE)

    assert proc.returncode == 1
    assert "apportion_redis_up 0.0" in proc.stdout


def test_submit_to_an_unreachable_broker_names_it_without_its_password() -> None:
    proc = apportion("submit", "partition", "-", stdin="{}", env=UNREACHABLE, timeout=120)

    assert proc.returncode == 1
    assert "cannot reach the broker at redis://user:***@127.0.0.1:1/0" in proc.stderr
    assert "s3cret" not in proc.stderr


def test_the_configured_payload_limit_is_what_solve_enforces() -> None:
    proc = apportion(
        "solve",
        "partition",
        str(EXAMPLES / "partition.json"),
        env={"APPORTION_LIMITS__MAX_PAYLOAD_BYTES": "200"},
    )

    assert proc.returncode == 4, proc.stdout
    env = output_json(proc)
    assert env["status"] == "rejected"
    assert env["error"]["code"] == "too_large"
    assert "limit of 200 bytes" in env["error"]["message"]
