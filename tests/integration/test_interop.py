"""Producers and observers outside Python: a Node.js producer and Flower's HTTP API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from tests.conftest import REQUIRE_REDIS, load_example
from tests.support.processes import REPO, RedisServer, Worker, free_port, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker]

NODE_PRODUCER = REPO / "examples" / "node-producer"


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        if REQUIRE_REDIS:  # CI: the interop checks must run, never skip
            pytest.fail("node is not installed; CI must run the Node.js producer test")
        pytest.skip("node is not installed")
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
    return node


def test_a_node_producer_enqueues_by_task_name_and_reads_the_result_event(
    worker: Worker, redis_server: RedisServer, tmp_path: Path
) -> None:
    node = _node()
    job = {**load_example("partition.json"), "job_id": f"node-{uuid.uuid4()}"}
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(job))

    proc = subprocess.run(
        [node, "producer.mjs", "partition", str(job_file), "--timeout", "60"],
        cwd=NODE_PRODUCER,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "REDIS_URL": redis_server.url},
    )

    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    envelope = out["envelope"]
    assert envelope["status"] == "ok"
    assert envelope["job_id"] == job["job_id"]
    sdb = next(d for d in envelope["result"]["disks"] if d["disk_id"] == "sdb")
    assert {s["space_id"]: s["size"] for s in sdb["spaces"]} == {
        "root": 136,
        "swap": 64,
        "ceph-journal": 0,
        "unallocated": 0,
    }
    # The worker ran it as the task the headers named, with the id the producer chose.
    assert f"apportion.partition[{out['taskId']}]" in worker.log_text()


def test_a_node_producer_gets_rejected_envelopes_for_bad_jobs(
    worker: Worker, redis_server: RedisServer, tmp_path: Path
) -> None:
    node = _node()
    job_file = tmp_path / "bad.json"
    job_file.write_text(json.dumps({"job_id": f"node-bad-{uuid.uuid4()}", "schema": "nope"}))

    proc = subprocess.run(
        [node, "producer.mjs", "partition", str(job_file)],
        cwd=NODE_PRODUCER,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "REDIS_URL": redis_server.url},
    )

    assert proc.returncode == 4, proc.stderr
    assert json.loads(proc.stdout)["envelope"]["status"] == "rejected"
    assert worker.alive


@pytest.fixture(scope="module")
def flower(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("flower") / "flower.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "apportion.workers.app",
                "flower",
                "--address=127.0.0.1",
                f"--port={port}",
            ],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={
                **os.environ,
                "APPORTION_REDIS_URL": redis_server.url,
                "FLOWER_UNAUTHENTICATED_API": "true",
            },
        )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            with urllib.request.urlopen(f"{base}/healthcheck", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        wait_until(up, 60, what="flower listening")
        time.sleep(1.0)  # let Flower subscribe to the event stream before we send
        yield base
    finally:
        proc.terminate()
        proc.wait(20)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def test_flower_lists_a_submitted_task_with_its_arguments(
    worker: Worker, flower: str, producer: Celery
) -> None:
    job_id = f"flower-{uuid.uuid4()}"
    result = producer.send_task(
        "apportion.partition", args=[{**load_example("partition.json"), "job_id": job_id}]
    )
    assert result.get(timeout=60)["status"] == "ok"

    def listed() -> bool:
        task = _get(f"{flower}/api/tasks").get(result.id)
        return bool(task) and task.get("state") == "SUCCESS"

    wait_until(listed, 30, what="task in Flower")
    task = _get(f"{flower}/api/task/info/{result.id}")
    assert task["name"] == "apportion.partition"
    assert job_id in task["args"]
    assert task["worker"].startswith("test-")
