"""Prometheus metrics: what a worker records per job, and what `apportion metrics` reads
from Redis (a real redis-server)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest

from apportion.config.settings import Settings
from apportion.workers.metrics.jobs import define
from apportion.workers.metrics.redis_state import RedisStateCollector
from apportion.workers.redis.keys import Keys
from tests.support.processes import REPO


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    value = registry.get_sample_value(name, labels)
    return value


def test_a_job_is_counted_by_kind_status_and_code_with_its_engine_and_end_to_end_times() -> None:
    registry = CollectorRegistry()
    metrics = define(registry)
    rejected = {
        "kind": "partition",
        "status": "rejected",
        "error": {"code": "invalid_job"},
        "elapsed_ms": 3.0,
        "warnings": [{}, {}],
    }

    metrics.record(rejected, sent_at=100.0, now=100.5)
    metrics.record({"kind": "partition", "status": "ok", "elapsed_ms": 1.0}, None, 101.0)

    jobs = "apportion_jobs_total"
    assert sample(registry, jobs, kind="partition", status="rejected", code="invalid_job") == 1
    assert sample(registry, jobs, kind="partition", status="ok", code="") == 1
    assert sample(registry, "apportion_job_engine_seconds_count", kind="partition") == 2
    assert sample(registry, "apportion_job_engine_seconds_sum", kind="partition") == 0.004
    # Only the job that carried apportion_sent_at has an end-to-end time.
    assert sample(registry, "apportion_job_end_to_end_seconds_count", kind="partition") == 1
    assert sample(registry, "apportion_job_end_to_end_seconds_sum", kind="partition") == 0.5
    assert sample(registry, "apportion_job_warnings_total", kind="partition") == 2


def test_a_sent_at_from_a_wrong_clock_is_not_taken_for_a_latency() -> None:
    registry = CollectorRegistry()
    metrics = define(registry)

    metrics.record({"kind": "partition", "status": "ok"}, sent_at=200.0, now=100.0)

    assert not sample(registry, "apportion_job_end_to_end_seconds_count", kind="partition")


def test_pool_processes_record_into_multiprocess_files_even_if_prometheus_came_first() -> None:
    # In `celery worker`, Flower's plugin imports prometheus_client before any of our
    # code runs; metrics must still reach the files the main process serves from.
    script = textwrap.dedent(
        """
        import os, urllib.request
        import prometheus_client  # first, as in a celery worker
        from apportion.workers.metrics import jobs
        port = __import__("tests.support.processes", fromlist=["free_port"]).free_port()
        directory = jobs.start(port, "127.0.0.1")
        pid = os.fork()
        if pid == 0:  # a pool child
            jobs.current().record({"kind": "partition", "status": "ok", "elapsed_ms": 2}, None, 0)
            os._exit(0)
        os.waitpid(pid, 0)
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
        jobs.stop(directory)
        print(text)
        print("left", os.path.exists(directory))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=REPO
    )

    assert proc.returncode == 0, proc.stderr
    assert 'apportion_jobs_total{code="",kind="partition",status="ok"} 1.0' in proc.stdout
    assert "left False" in proc.stdout  # the private directory is removed at exit


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


@pytest.mark.redis
def test_the_exporter_reads_depth_streams_lag_pending_age_and_dead_letters(
    redis_url: str, client: redis.Redis
) -> None:
    keys = Keys()
    stream = keys.results_stream("partition")
    client.lpush("partition", "job-1", "job-2")
    for i in range(3):
        client.xadd(stream, {"job_id": f"j{i}"})
    client.xgroup_create(stream, "subscribers", id="0")
    client.xreadgroup("subscribers", "c1", {stream: ">"}, count=1)  # one read, not acked
    client.xadd(keys.dead_letters_stream, {"reason": "undecodable"})
    time.sleep(0.05)
    registry = CollectorRegistry()
    registry.register(RedisStateCollector(Settings(redis_url=redis_url)))

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("apportion_redis_up") == 1
    assert value("apportion_queue_depth", queue="partition") == 2
    assert value("apportion_queue_depth", queue="attach") == 0
    assert value("apportion_stream_length", stream=stream) == 3
    assert value("apportion_stream_pending", stream=stream, group="subscribers") == 1
    assert value("apportion_stream_consumer_lag", stream=stream, group="subscribers") == 2
    age = value("apportion_stream_oldest_pending_age_seconds", stream=stream, group="subscribers")
    assert age is not None
    assert 0.04 <= age < 60
    assert value("apportion_dead_letters") == 1


def test_a_scrape_while_redis_is_down_says_so_at_once() -> None:
    registry = CollectorRegistry()
    registry.register(RedisStateCollector(Settings(redis_url="redis://127.0.0.1:1/0")))

    started = time.monotonic()
    text = generate_latest(registry).decode()

    assert "apportion_redis_up 0.0" in text
    assert "apportion_queue_depth" not in text
    assert time.monotonic() - started < 5
