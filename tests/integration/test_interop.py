"""A producer outside Python: examples/node-producer (Node.js, no Celery library) sends
every example job by task name to a real worker and gets the envelope of
examples/<name>.envelope.json back (Flower's API: tests/integration/test_flower.py)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, REQUIRE_REDIS, load_example
from tests.support.gen_docs import example_jobs, kind_of, without_timing
from tests.support.processes import REPO, RedisServer, Worker, free_port, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker]

NODE_PRODUCER = REPO / "examples" / "node-producer"


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        if REQUIRE_REDIS:  # CI: the interop checks must run, never skip
            pytest.fail("node is not installed; CI must run the Node.js producer test")
        pytest.skip("node is not installed")
    # The suite runs in several processes (scripts/test): one installs the producer's
    # client while the others wait, since `npm ci` first deletes node_modules.
    folder = os.open(NODE_PRODUCER, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        if not (NODE_PRODUCER / "node_modules" / "redis").exists():
            npm = shutil.which("npm")
            assert npm, "npm is needed to install the producer's redis client"
            subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"],
                cwd=NODE_PRODUCER,
                check=True,
                capture_output=True,
                timeout=300,
            )
    finally:
        os.close(folder)  # and with it the lock
    return node


def produce(
    redis_server: RedisServer, kind: str, job_file: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    """The producer given the workers' variable, APPORTION_REDIS_URL (or ``env``)."""
    inherited = {
        k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "APPORTION_REDIS_URL")
    }
    return subprocess.run(
        [_node(), str(NODE_PRODUCER / "producer.mjs"), kind, str(job_file), "--timeout", "60"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**inherited, **(env or {"APPORTION_REDIS_URL": redis_server.url})},
    )


def with_fresh_key(name: str) -> dict[str, Any]:
    """The example with a key never used before (and, for an event, a recent time: the
    example's fixed day is older than the failure history keeps)."""
    job: dict[str, Any] = load_example(f"{name}.json")
    key = "event_id" if kind_of(name) == "launch_outcome" else "job_id"
    job[key] = f"node-{uuid.uuid4()}"
    if key == "event_id":
        job["at"] = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return job


@pytest.mark.parametrize("name", sorted(example_jobs()))
def test_the_node_producer_gets_each_examples_envelope_from_its_stream(
    name: str, worker: Worker, redis_server: RedisServer, tmp_path: Path
) -> None:
    job = with_fresh_key(name)
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(job))

    proc = produce(redis_server, kind_of(name), job_file)

    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["entryId"] is not None  # read from the result stream
    envelope = out["envelope"]
    expected = json.loads((EXAMPLES / f"{name}.envelope.json").read_text())
    key = job.get("event_id", job.get("job_id"))
    expected["job_id"] = key
    if kind_of(name) == "launch_outcome":
        # Recorded by the worker's failure history (`apportion solve` has none: null).
        assert envelope["result"].pop("recorded") is True
        expected["result"].pop("recorded")
        expected["result"] |= {"event_id": key, "at": job["at"]}
    assert without_timing(envelope) == without_timing(expected)
    # The worker ran it as the task the producer named, under the id it chose. It logs
    # that line after publishing, so the producer may read the envelope first.
    wait_until(lambda: f"task {out['taskId']}" in worker.log_text(), 10, what="the job's log line")


def test_sending_the_same_job_again_answers_this_message_not_an_older_event(
    worker: Worker, redis_server: RedisServer, tmp_path: Path
) -> None:
    job = with_fresh_key("partition")
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(job))

    first = json.loads(produce(redis_server, "partition", job_file).stdout)
    again = produce(redis_server, "partition", job_file)

    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    # One event per job_id on the stream: the second answer is this message's own, read
    # from the result backend by its task id, never the first message's stream entry.
    assert second["taskId"] != first["taskId"]
    assert second["entryId"] is None
    assert second["envelope"]["job_id"] == job["job_id"]


def test_a_node_producer_gets_rejected_envelopes_for_bad_jobs(
    worker: Worker, redis_server: RedisServer, tmp_path: Path
) -> None:
    job_file = tmp_path / "bad.json"
    job_file.write_text(json.dumps({"job_id": f"node-bad-{uuid.uuid4()}", "schema": "nope"}))

    proc = produce(redis_server, "partition", job_file)

    assert proc.returncode == 4, proc.stderr
    assert json.loads(proc.stdout)["envelope"]["status"] == "rejected"
    assert worker.alive


def test_the_node_producer_reads_apportion_redis_url_over_the_deprecated_redis_url(
    worker: Worker, redis_server: RedisServer, tmp_path: Path
) -> None:
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(with_fresh_key("partition")))
    nowhere = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there

    both = produce(
        redis_server, "partition", job_file, APPORTION_REDIS_URL=redis_server.url, REDIS_URL=nowhere
    )
    old_name_only = produce(redis_server, "partition", job_file, REDIS_URL=redis_server.url)

    assert both.returncode == 0, both.stderr
    assert "REDIS_URL is ignored: APPORTION_REDIS_URL is set" in both.stderr
    assert old_name_only.returncode == 0, old_name_only.stderr
    assert "REDIS_URL is deprecated: set APPORTION_REDIS_URL" in old_name_only.stderr
