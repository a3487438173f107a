"""`apportion submit` and `apportion events` against the real worker and Redis."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.acceptance.cli import APPORTION, apportion, output_json
from tests.conftest import EXAMPLES, load_example
from tests.support.processes import RedisServer, Worker, free_port, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker]


def test_submit_wait_prints_the_envelope_exactly_as_solve_would(
    worker: Worker, redis_server: RedisServer
) -> None:
    job = {**load_example("partition.json"), "job_id": f"cli-{uuid.uuid4()}"}
    env = {"APPORTION_REDIS_URL": redis_server.url}

    submitted = apportion("submit", "partition", "-", "--wait", stdin=json.dumps(job), env=env)
    solved = apportion("solve", "partition", "-", stdin=json.dumps(job))

    assert submitted.returncode == solved.returncode == 0, submitted.stderr
    a, b = output_json(submitted), output_json(solved)
    assert a["result"] == b["result"]
    assert a["job_id"] == b["job_id"] == job["job_id"]


def _timeless(printed: str) -> str:
    """Printed envelopes with their ``elapsed_ms`` (which differs between two runs) zeroed."""
    return re.sub(r'"elapsed_ms":( ?)[0-9.e+-]+', r'"elapsed_ms":\g<1>0', printed)


@pytest.mark.parametrize(
    ("kind", "example", "changes", "pretty", "status"),
    [
        ("partition", "partition.json", {}, "--no-pretty", 0),
        ("launch_select", "launch_select.candidates.json", {}, "--no-pretty", 0),
        ("launch_select", "launch_select.candidates.json", {}, "--pretty", 0),
        (
            "launch_select",
            "launch_select.candidates.json",
            {"request": "resources=VCPU:99999"},
            "--no-pretty",
            3,
        ),  # infeasible: the exit status read from the stored answer
    ],
)
def test_submit_wait_prints_the_same_bytes_and_status_as_solve(
    worker: Worker,
    redis_server: RedisServer,
    kind: str,
    example: str,
    changes: dict[str, str],
    pretty: str,
    status: int,
) -> None:
    job = {**load_example(example), **changes, "job_id": f"bytes-{uuid.uuid4()}"}
    env = {"APPORTION_REDIS_URL": redis_server.url}

    for jobs, exit_status in ((json.dumps(job), status), (json.dumps([job, job]), 0)):
        submitted = apportion("submit", kind, "-", "--wait", pretty, stdin=jobs, env=env)
        solved = apportion("solve", kind, "-", pretty, stdin=jobs)

        assert (submitted.returncode, solved.returncode) == (exit_status, exit_status)
        assert _timeless(submitted.stdout) == _timeless(solved.stdout)


def test_submit_without_wait_prints_task_ids_for_an_array(
    worker: Worker, redis_server: RedisServer
) -> None:
    job = load_example("partition.json")
    proc = apportion(
        "submit",
        "partition",
        "-",
        stdin=json.dumps([job, job]),
        env={"APPORTION_REDIS_URL": redis_server.url},
    )

    assert proc.returncode == 0, proc.stderr
    ids = output_json(proc)
    assert len(ids) == 2
    assert all(uuid.UUID(i) for i in ids)


def test_submit_to_an_unreachable_broker_fails_clearly() -> None:
    proc = apportion(
        "submit",
        "partition",
        "-",
        stdin=json.dumps(load_example("partition.json")),
        env={"APPORTION_REDIS_URL": "redis://127.0.0.1:1/0"},
        timeout=120,
    )

    assert proc.returncode == 1
    assert "cannot reach the broker" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_events_follows_the_result_stream_with_a_consumer_group(
    worker: Worker, redis_server: RedisServer
) -> None:
    env = {"APPORTION_REDIS_URL": redis_server.url}
    job_ids = [f"events-{uuid.uuid4()}" for _ in range(3)]
    jobs = [{**load_example("partition.json"), "job_id": j} for j in job_ids]
    assert (
        apportion("submit", "partition", "-", "--wait", stdin=json.dumps(jobs), env=env).returncode
        == 0
    )

    group = f"g-{uuid.uuid4()}"
    proc = apportion(
        "events", "--kind", "partition", "--group", group, "--json", "--idle-exit", "2", env=env
    )
    seen = [json.loads(line) for line in proc.stdout.splitlines()]
    again = apportion(
        "events", "--kind", "partition", "--group", group, "--json", "--idle-exit", "1", env=env
    )

    assert proc.returncode == 0, proc.stderr
    mine = [e for e in seen if e["job_id"] in job_ids]
    assert sorted(e["job_id"] for e in mine) == sorted(job_ids)
    assert all(e["envelope"]["status"] == "ok" for e in mine)
    # Acknowledged entries are not delivered to the group again.
    assert again.stdout.strip() == ""


def test_the_worker_logs_one_line_per_job_and_no_payload(
    worker: Worker, redis_server: RedisServer
) -> None:
    job_id = f"line-{uuid.uuid4()}"
    job = {**load_example("partition.json"), "job_id": job_id}
    env = {"APPORTION_REDIS_URL": redis_server.url}
    assert apportion("submit", "partition", "-", "--wait", stdin=json.dumps(job), env=env).stdout

    wait_until(lambda: job_id in worker.log_text(), 10, what="the job's log line")
    lines = [line for line in worker.log_text().splitlines() if job_id in line]

    assert len(lines) == 1
    assert "INFO/ForkPoolWorker-" in lines[0]
    assert f"job {job_id} partition ok (engine " in lines[0]
    assert ", end-to-end " in lines[0]
    assert "yaql=let(ram" not in worker.log_text()
    assert " succeeded in " not in worker.log_text()


def test_submit_wait_gives_up_within_its_timeout_when_redis_goes_away(tmp_path: Path) -> None:
    server = RedisServer(port=free_port(), workdir=tmp_path)
    server.start()
    try:
        proc = subprocess.Popen(
            [
                APPORTION,
                "submit",
                "partition",
                str(EXAMPLES / "partition.json"),
                "--wait",
                "--timeout",
                "4",
            ],
            env={**os.environ, "APPORTION_REDIS_URL": server.url},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Sent (its queue is a list in the broker), waiting for an answer no worker gives.
        client = server.client()
        wait_until(
            lambda: any(client.type(k) == b"list" for k in client.scan_iter()), 30, what="job sent"
        )
        server.stop()
        started = time.monotonic()
        _, stderr = proc.communicate(timeout=60)
    finally:
        server.stop()

    assert proc.returncode == 1
    assert time.monotonic() - started < 15
    assert f"lost the result backend at {server.url}" in stderr
    assert "Traceback" not in stderr
