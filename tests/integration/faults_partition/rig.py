"""What the partition fault tests send, and how they check the answers and the worker's log."""

from __future__ import annotations

import json
import time

import redis
from celery import Celery

from tests.acceptance.cli import apportion
from tests.support.jobs import SMALL_PARTITION, Job, entry_envelope, event_counts
from tests.support.processes import Worker, wait_until
from tests.support.tcp_proxy import TcpProxy

# How soon after a fault the worker must say that it lost Redis.
NOTICED_WITHIN = 15.0
# What the worker logs: its own watch, when Redis stops answering a PING
# (workers/redis/reachability.py); Celery's consumer, when it drops a connection that
# died (reset); kombu's check, when a blocking take got no reply in time (every
# APPORTION_REDIS_HEALTH_CHECK_INTERVAL): it drops that connection itself, and the
# consumer carries on without one of Celery's lines. With the watch's own connection
# opened after a freeze (it was reconnecting), kombu's line is the only one.
UNREACHABLE = "Redis unreachable from this worker"
LOST = "Connection to broker lost"
STALE = "Redis BRPOP got no reply"
# Jobs of every kind that waits on Redis inside the job (the policy store, the failure
# history) as well as the plain ones.
WEIGHTS = {"partition": 2, "launch_select_default_policy": 1, "launch_outcome": 1}
KINDS = ("partition", "launch_select", "launch_outcome")


def send(producer: Celery, jobs: list[Job]) -> None:
    for job in jobs:
        producer.send_task(job.task_name, args=[job.payload])


def answers(client: redis.Redis) -> dict[str, list[tuple[str, str]]]:
    """job_id → (status, error code) of each result event for it."""
    out: dict[str, list[tuple[str, str]]] = {}
    for kind in KINDS:
        for _, fields in client.xrange(f"apportion:results:{kind}"):
            envelope = entry_envelope(client, fields)
            code = (envelope.get("error") or {}).get("code", "")
            out.setdefault(fields[b"job_id"].decode(), []).append(
                (fields[b"status"].decode(), code)
            )
    return out


def assert_each_answered_once_and_ok(client: redis.Redis, jobs: list[Job], within: float) -> None:
    keys = {job.key for job in jobs}
    wait_until(
        lambda: keys <= set(event_counts(client, KINDS)),
        within,
        interval=0.2,
        what=f"answers to {len(keys)} jobs",
    )
    found = answers(client)
    mine = {key: found[key] for key in keys}
    assert {key: len(a) for key, a in mine.items()} == dict.fromkeys(keys, 1)
    assert {key: a[0] for key, a in mine.items()} == dict.fromkeys(keys, ("ok", ""))


def log_from(worker: Worker) -> int:
    return len(worker.log_text())


def noticed(worker: Worker, offset: int, began: float, *lines: str) -> None:
    """The worker logged one of ``lines`` within NOTICED_WITHIN seconds of ``began``."""
    wait_until(
        lambda: any(line in worker.log_text()[offset:] for line in lines),
        began + NOTICED_WITHIN - time.monotonic(),
        interval=0.1,
        what=f"one of {lines} in the worker's log",
    )


def submit_and_wait_through(proxy: TcpProxy) -> tuple[float, int, str]:
    job = json.dumps({**SMALL_PARTITION, "job_id": f"cli-{time.monotonic_ns()}"})
    began = time.monotonic()
    done = apportion(
        "submit",
        "partition",
        "-",
        "--wait",
        "--timeout",
        "10",
        stdin=job,
        env={"APPORTION_REDIS_URL": proxy.url},
        timeout=60,
    )
    return time.monotonic() - began, done.returncode, done.stderr
