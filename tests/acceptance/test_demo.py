"""`apportion demo`: the embedded default runs with no Redis at all."""

from __future__ import annotations

import json

from tests.acceptance.cli import apportion


def test_the_demo_runs_real_jobs_through_an_in_process_worker_without_redis() -> None:
    # Point Redis at a closed port: the demo must not need it.
    proc = apportion("demo", env={"APPORTION_REDIS_URL": "redis://127.0.0.1:1/0"})

    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "disks × spaces" in out
    assert "demo-partition-node1" in out
    assert "infeasible" in out
    assert "rejected" in out
    assert "result events" in out


def test_the_demo_publishes_one_event_per_job_even_when_a_job_is_sent_twice() -> None:
    proc = apportion("demo", "--json", env={"APPORTION_REDIS_URL": "redis://127.0.0.1:1/0"})

    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    job_ids = [e["job_id"] for e in data["events"]]
    assert len(job_ids) == len(set(job_ids)) == len(data["envelopes"])
    statuses = {e["job_id"]: e["status"] for e in data["envelopes"]}
    assert statuses["demo-partition-node1"] == "ok"
    assert statuses["demo-partition-too-small"] == "infeasible"
    assert statuses["demo-partition-malformed"] == "rejected"
