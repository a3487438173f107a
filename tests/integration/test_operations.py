"""What an operator runs and reads, against a real worker started with `apportion worker`:
Celery options passed through, `apportion health`, the worker's metrics, JSON logs with
one line per job, progress on a batch submit."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from apportion.config.settings import Settings
from apportion.workers.producer import producer_app
from apportion.workers.redis.keys import Keys
from tests.acceptance.cli import APPORTION, apportion, output_json
from tests.conftest import load_example
from tests.support.processes import REPO, RedisServer, free_port, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker]

QUEUES = "partition,events"


@dataclass
class Observed:
    env: dict[str, str]
    log: Path
    metrics_url: str
    node: str


@pytest.fixture(scope="module")
def observed(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Observed]:
    """`apportion worker -c 1 -Q partition,events`, JSON logs, metrics on a free port."""
    redis_server.client().flushall()
    port = free_port()
    log = tmp_path_factory.mktemp("observed") / "worker.log"
    env = {"APPORTION_REDIS_URL": redis_server.url, "PYTHONUNBUFFERED": "1"}
    worker_env = {**env, "APPORTION_METRICS_PORT": str(port), "APPORTION_LOG_FORMAT": "json"}
    node = f"ops-{uuid.uuid4().hex[:8]}@%h"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                APPORTION,
                "worker",
                "-c",
                "1",
                "-Q",
                QUEUES,
                "-n",
                node,
                "--without-mingle",
                "--without-gossip",
            ],
            cwd=REPO,
            env={**os.environ, **worker_env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(lambda: b" ready." in log.read_bytes() or proc.poll() is not None, 90)
        assert proc.poll() is None, log.read_text()[-3000:]
        yield Observed(env, log, f"http://127.0.0.1:{port}/metrics", node)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def inspect(url: str, method: str) -> dict[str, Any]:
    app = producer_app(Settings(redis_url=url))
    try:
        replies: dict[str, Any] = getattr(app.control.inspect(timeout=2), method)() or {}
        return replies
    finally:
        app.close()


def test_apportion_worker_hands_every_option_to_celery(
    observed: Observed, redis_server: RedisServer
) -> None:
    stats = inspect(redis_server.url, "stats")
    queues = inspect(redis_server.url, "active_queues")

    (name,) = [n for n in stats if n.startswith(observed.node.split("@")[0])]
    assert stats[name]["pool"]["max-concurrency"] == 1
    assert sorted(q["name"] for q in queues[name]) == ["events", "partition"]


def test_health_is_unhealthy_while_a_queue_has_no_worker_and_names_it(
    observed: Observed,
) -> None:
    proc = apportion("health", env=observed.env)

    assert proc.returncode == 1
    assert "problem: no worker consumes queue 'attach'" in proc.stdout
    assert "problem: no worker consumes queue 'launch'" in proc.stdout


def test_health_of_the_queues_a_worker_serves_is_healthy(observed: Observed) -> None:
    proc = apportion("health", "--queue", "partition", "--queue", "events", env=observed.env)

    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.startswith("healthy")


def test_health_reports_queue_depth_and_a_subscriber_that_stopped_acknowledging(
    observed: Observed, redis_server: RedisServer
) -> None:
    client = redis_server.client()
    client.delete("attach")
    client.lpush("attach", "waiting-1", "waiting-2")  # nobody consumes attach here
    stream = Keys().results_stream("launch_outcome")
    client.xadd(stream, {"job_id": "e"})
    group = f"stuck-{uuid.uuid4().hex[:6]}"
    client.xgroup_create(stream, group, id="0")
    client.xreadgroup(group, "c", {stream: ">"}, count=1)  # read, never acknowledged

    report = output_json(apportion("health", "--json", "--queue", "partition", env=observed.env))
    strict = apportion("health", "--queue", "partition", "--max-pending-age", "0", env=observed.env)

    assert report["healthy"] is True
    assert report["queues"]["attach"]["depth"] == 2
    pending = report["streams"][stream]["groups"][group]
    assert pending["pending"] == 1
    assert pending["oldest_pending_age_s"] is not None
    assert strict.returncode == 1
    assert f"{stream} group {group}: an entry has waited" in strict.stdout
    client.delete("attach")


def test_the_worker_counts_jobs_by_kind_and_status_with_their_latencies(
    observed: Observed,
) -> None:
    ok = {**load_example("partition.json"), "job_id": f"m-{uuid.uuid4()}"}
    bad = {"job_id": f"m-bad-{uuid.uuid4()}", "schema": "nope"}
    for job in (ok, bad):
        apportion("submit", "partition", "-", "--wait", stdin=json.dumps(job), env=observed.env)

    with urllib.request.urlopen(observed.metrics_url, timeout=5) as response:
        text = response.read().decode()

    assert 'apportion_jobs_total{code="",kind="partition",status="ok"}' in text
    assert 'apportion_jobs_total{code="invalid_job",kind="partition",status="rejected"}' in text
    assert 'apportion_job_engine_seconds_count{kind="partition"}' in text
    # apportion submit sends apportion_sent_at: the end-to-end latency is measured.
    assert 'apportion_job_end_to_end_seconds_count{kind="partition"}' in text


def _log_records(log: Path) -> list[dict[str, Any]]:
    records = []
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            records.append(json.loads(line))
    return records


def test_json_logs_have_one_line_per_job_with_its_fields_and_no_payload(
    observed: Observed,
) -> None:
    job_id = f"log-{uuid.uuid4()}"
    job = {**load_example("partition.json"), "job_id": job_id}
    apportion("submit", "partition", "-", "--wait", stdin=json.dumps(job), env=observed.env)

    def logged() -> bool:
        return job_id in observed.log.read_text()

    wait_until(logged, 10, what="the job's log line")
    text = observed.log.read_text()
    mine = [r for r in _log_records(observed.log) if job_id in json.dumps(r)]
    assert len(mine) == 1
    (line,) = mine
    assert line["logger"] == "apportion.jobs"
    assert line["level"] == "INFO"
    assert (line["job_id"], line["kind"], line["status"]) == (job_id, "partition", "ok")
    assert line["engine_ms"] > 0
    assert line["end_to_end_ms"] > 0
    # Celery's per-task lines and the job's payload stay out of INFO logs.
    assert "succeeded in" not in text
    assert "] received" not in text
    assert "yaql=let(ram" not in text


def test_a_batch_submit_shows_its_progress(observed: Observed) -> None:
    jobs = [{**load_example("partition.json"), "job_id": f"batch-{i}"} for i in range(25)]

    proc = apportion(
        "submit", "partition", "-", "--wait", "--progress", stdin=json.dumps(jobs), env=observed.env
    )

    assert proc.returncode == 0, proc.stderr
    assert len(output_json(proc)) == 25
    assert "sent" in proc.stderr
    assert "answered" in proc.stderr
    assert "25/25" in proc.stderr


def test_the_exporter_serves_what_redis_holds(
    observed: Observed, redis_server: RedisServer
) -> None:
    redis_server.client().lpush("launch", "waiting")
    proc = apportion("metrics", "--once", env=observed.env)

    assert proc.returncode == 0
    assert 'apportion_queue_depth{queue="launch"} 1.0' in proc.stdout
    assert 'apportion_stream_length{stream="apportion:results:partition"}' in proc.stdout
    redis.Redis.from_url(redis_server.url).delete("launch")


def test_health_of_one_named_worker_as_a_container_check_asks(observed: Observed) -> None:
    node = observed.node.replace("%h", socket.gethostname())
    mine = apportion("health", "--queue", "partition", "--node", node, env=observed.env)
    other = apportion("health", "--queue", "partition", "--node", "gone@nowhere", env=observed.env)

    assert mine.returncode == 0, mine.stdout
    assert other.returncode == 1
    assert "problem: worker gone@nowhere did not answer" in other.stdout
