"""Redis behind Sentinel: the primary is SIGKILLed while 1,000 jobs flow.

One primary, two replicas and three sentinels (tests/support/processes.py,
SentinelCluster: down after 2 s). apportion knows only the sentinels
(``APPORTION_REDIS_URL=sentinel://…;sentinel://…``, ``APPORTION_SENTINEL_MASTER``):
the worker's broker connection, its result backend, its publisher, the producer and
the test's own reads all find the primary through them. The worker is never
restarted: it must reconnect to the promoted replica by itself, and every job must
end with exactly one result event.

The master and the sentinels each have a password; neither may show in the worker's
log or the commands' output. Passed 10 of 10 consecutive runs on the loaded 2-core
test machine in its final form, 20-33 s each (bench/faults.md, "Sentinel failover").
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from apportion.config.settings import Settings
from apportion.workers.app import create_app
from apportion.workers.redis.client import make_redis, redact_url
from tests.acceptance.cli import apportion
from tests.conftest import load_example, running
from tests.integration.conftest import short_redelivery, worker_env
from tests.support.jobs import event_counts, make_job, queued_and_unacked, unacked_task_ids
from tests.support.processes import SentinelCluster, Worker, running_worker, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.slow]

JOBS = 1000
# The primary and replicas, and the sentinels, each want a password of their own.
PASSWORD = f"pw-{uuid.uuid4().hex}"
SENTINEL_PASSWORD = f"spw-{uuid.uuid4().hex}"
SENTINEL_ENV = {"APPORTION_SENTINEL_PASSWORD": SENTINEL_PASSWORD}
# A job whose acknowledgement went to the dead primary is redelivered after the
# visibility timeout (and publishes nothing new): keep it short.
LIMITS = short_redelivery(visibility=14, soft=10, hard=12)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SentinelCluster]:
    yield from running(
        SentinelCluster(tmp_path / "redis", password=PASSWORD, sentinel_password=SENTINEL_PASSWORD)
    )


def test_all_jobs_are_answered_exactly_once_when_the_primary_is_killed_under_them(
    cluster: SentinelCluster, tmp_path: Path
) -> None:
    env = worker_env(
        cluster.url, APPORTION_SENTINEL_MASTER=cluster.master, **SENTINEL_ENV, **LIMITS
    )
    worker = Worker(env=env, logfile=tmp_path / "worker.log", queues="partition")
    worker.start()
    settings = Settings(
        redis_url=cluster.url,
        sentinel_master=cluster.master,
        sentinel_password=SENTINEL_PASSWORD,
    )
    producer = create_app(settings)
    reader = make_redis(
        cluster.url,
        sentinel_master=cluster.master,
        sentinel_password=SENTINEL_PASSWORD,
        timeout=2,
        retries=0,
    )
    jobs = [make_job("partition", "failover", i) for i in range(JOBS)]
    keys = {j.key for j in jobs}
    errors: list[BaseException] = []

    def send() -> None:
        try:
            for job in jobs:
                producer.send_task(job.task_name, args=[job.payload], ignore_result=True)
                time.sleep(0.002)  # still sending when the primary goes
        except BaseException as exc:  # recorded, asserted below
            errors.append(exc)

    def answered() -> int:
        try:
            return len(keys & set(event_counts(reader, {"partition"})))
        except redis.ConnectionError:  # the failover is still under way
            return -1

    cli_env = {
        "APPORTION_REDIS_URL": cluster.url,
        "APPORTION_SENTINEL_MASTER": cluster.master,
        **SENTINEL_ENV,
    }
    try:
        pid = worker.proc.pid  # type: ignore[union-attr]
        old = cluster.primary()
        # The commands too, through the sentinels: submit waits on the result backend.
        job = {**load_example("partition.json"), "job_id": "through-sentinel"}
        submitted = apportion(
            "submit", "partition", "-", "--wait", stdin=json.dumps(job), env=cli_env
        )
        assert (submitted.returncode, json.loads(submitted.stdout)["status"]) == (0, "ok")
        sender = threading.Thread(target=send)
        sender.start()
        wait_until(lambda: answered() >= 200, 60, interval=0.1, what="jobs flowing")
        assert old.proc is not None
        counts_before = event_counts(reader, {"partition"})
        old.proc.kill()  # SIGKILL: no goodbye to clients or replicas
        killed_at, before = time.monotonic(), len(keys & set(counts_before))
        wait_until(lambda: answered() > before + 10, 40, interval=0.1, what="answers again")
        resumed = time.monotonic() - killed_at
        sender.join(60)
        try:
            wait_until(lambda: answered() >= JOBS, 60, interval=0.2, what="every job answered")
        except TimeoutError as exc:
            missing = keys - set(event_counts(reader, {"partition"}))
            state = queued_and_unacked(reader), unacked_task_ids(reader)
            raise AssertionError(
                f"unanswered: {sorted(missing)}; queued, unacked: {state}"
            ) from exc
        time.sleep(1.0)  # a duplicate would arrive now, if at all
        counts = event_counts(reader, {"partition"})
        health = apportion("health", "--queue", "partition", "--timeout", "3", env=cli_env)
        events = apportion("events", "--kind", "partition", "--json", "--count", "1", env=cli_env)
        alive = worker.alive and worker.proc is not None and worker.proc.pid == pid
    finally:
        worker.stop()
        producer.close()

    assert errors == []
    assert health.returncode == 0, health.stdout
    assert events.returncode == 0, events.stderr
    assert json.loads(events.stdout)["job_id"] in counts
    assert f"redis   {redact_url(cluster.url)}  ok" in health.stdout
    assert cluster.primary_port() != old.port
    assert set(counts) == {*keys, "through-sentinel"}
    assert max(counts.values()) == 1
    assert alive  # the same worker process throughout
    log = worker.log_text()
    assert "Unrecoverable error" not in log
    outputs = log + "".join(p.stdout + p.stderr for p in (submitted, health, events))
    assert PASSWORD not in outputs
    assert SENTINEL_PASSWORD not in outputs
    print(f"\n{JOBS} jobs; answers resumed {resumed:.1f} s after the primary was killed")


def test_the_policy_store_is_seeded_and_edited_through_the_sentinels(
    cluster: SentinelCluster, tmp_path: Path
) -> None:
    # Only the sentinels known: the worker seeds the default policy when it starts, and
    # `apportion policy` lists it and stores a new pool's policy.
    env = worker_env(cluster.url, APPORTION_SENTINEL_MASTER=cluster.master, **SENTINEL_ENV)
    cli_env = {
        "APPORTION_REDIS_URL": cluster.url,
        "APPORTION_SENTINEL_MASTER": cluster.master,
        **SENTINEL_ENV,
    }
    with running_worker(env, tmp_path / "worker.log", queues="launch"):
        listed = apportion("policy", "list", "--json", env=cli_env)
        stored = apportion("policy", "set", "gpu", "-", stdin="- module: equal\n", env=cli_env)
        shown = apportion("policy", "list", "--json", env=cli_env)

    assert listed.returncode == 0, listed.stderr
    assert [row["pool"] for row in json.loads(listed.stdout)] == ["default"]
    assert stored.returncode == 0, stored.stderr
    assert sorted(row["pool"] for row in json.loads(shown.stdout)) == ["default", "gpu"]
