"""A network between the worker and Redis that breaks the ways real networks break: a
fault-injecting TCP proxy (tests/support/tcp_proxy.py) sits between a real worker and a
real redis-server; the producer sends straight to Redis.

For each fault — a blackhole (nothing forwarded, old or new connections), the open
connections frozen while new ones pass, every connection reset every 2 s, 200 ms of
latency each way — every job sent before, during and after it is answered exactly once,
no valid job is answered ``time_limit``, and within 15 s the worker logs that it lost
Redis (``Redis unreachable from this worker``) or a connection (``Connection to broker
lost``, or kombu's ``Redis BRPOP got no reply``). During the blackhole ``apportion
submit --wait --timeout 10`` through the proxy gives up within 15 s. The blackhole
lasts 120 s, as an operator's failover or dead NAT entry might: twenty times the hard
limit and ten times the visibility timeout, so the jobs in hand are restored and taken
again several times while the worker keeps reconnecting.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import redis
from celery import Celery

from apportion.config.settings import Settings
from apportion.workers.app import create_app
from tests.acceptance.cli import apportion
from tests.conftest import own_redis_server
from tests.integration.conftest import short_redelivery, worker_env
from tests.support.jobs import SMALL_PARTITION, Job, entry_envelope, event_counts, mixed_jobs
from tests.support.processes import RedisServer, Worker, running_worker, wait_until
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.slow]

SOFT, HARD, VISIBILITY = 4, 6, 12
BLACKHOLE = 120.0
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


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    yield from own_redis_server(tmp_path_factory.mktemp("redis"))


@pytest.fixture(scope="module")
def proxy(server: RedisServer) -> Iterator[TcpProxy]:
    tcp = TcpProxy("127.0.0.1", server.port)
    tcp.start()
    try:
        yield tcp
    finally:
        tcp.stop()


@pytest.fixture(scope="module")
def worker(proxy: TcpProxy, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    # The unacked sweep every 3 s, not every second: under 200 ms of latency each way
    # its few round trips would otherwise fill the worker's loop.
    env = worker_env(
        proxy.url,
        **{**short_redelivery(VISIBILITY, SOFT, HARD), "APPORTION_UNACKED_RESTORE_INTERVAL": "3"},
    )
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    with running_worker(env, log, queues="partition,launch,events") as w:
        yield w


@pytest.fixture(scope="module")
def producer(server: RedisServer) -> Iterator[Celery]:
    app = create_app(Settings(redis_url=server.url))
    yield app
    app.close()


@pytest.fixture
def client(server: RedisServer) -> Iterator[redis.Redis]:
    c = server.client()
    yield c
    c.close()


@pytest.fixture(autouse=True)
def healed(proxy: TcpProxy, worker: Worker) -> Iterator[None]:
    """Every test starts and ends with a clean network; the worker's lines about Redis
    and time limits are printed (shown when the test fails)."""
    offset = log_from(worker)
    yield
    for line in worker.log_text()[offset:].splitlines():
        if any(word in line for word in ("Redis", "broker", "limit", "ERROR", "CRITICAL")):
            print(line)
    proxy.set_blackhole(False)
    proxy.thaw()
    proxy.latency = 0.0


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


def test_a_blackhole_is_logged_at_once_and_every_job_is_answered_once_after_it(
    proxy: TcpProxy, worker: Worker, producer: Celery, client: redis.Redis
) -> None:
    before, during, after = (mixed_jobs(8, f"hole-{p}", WEIGHTS) for p in "bda")
    offset = log_from(worker)
    send(producer, before)
    # Mid-batch: the jobs in hand meet the blackhole reading the policy store, recording
    # an outcome or publishing their answers.
    wait_until(lambda: event_counts(client, KINDS).keys() & {j.key for j in before}, 60)

    proxy.set_blackhole(True)
    began = time.monotonic()
    send(producer, during)
    seconds, code, stderr = submit_and_wait_through(proxy)
    assert seconds < 15, seconds
    assert code == 1
    assert "cannot reach the broker" in stderr, stderr
    noticed(worker, offset, began, UNREACHABLE)
    wait_until(lambda: time.monotonic() - began >= BLACKHOLE, BLACKHOLE + 1, what="the outage")
    proxy.set_blackhole(False)
    send(producer, after)

    assert_each_answered_once_and_ok(client, before + during + after, 90)
    assert worker.alive


def test_connections_frozen_while_new_ones_pass_lose_no_job(
    proxy: TcpProxy, worker: Worker, producer: Celery, client: redis.Redis
) -> None:
    jobs = mixed_jobs(16, "frozen", WEIGHTS)
    send(producer, jobs[:4])
    assert_each_answered_once_and_ok(client, jobs[:4], 60)
    offset = log_from(worker)

    frozen = proxy.freeze_open()
    began = time.monotonic()
    assert frozen > 0
    send(producer, jobs[4:])
    noticed(worker, offset, began, UNREACHABLE, LOST, STALE)

    assert_each_answered_once_and_ok(client, jobs, 90)
    assert worker.alive


def test_connections_reset_every_two_seconds_lose_no_job(
    proxy: TcpProxy, worker: Worker, producer: Celery, client: redis.Redis
) -> None:
    jobs = mixed_jobs(24, "reset", WEIGHTS)
    offset = log_from(worker)
    began = time.monotonic()
    resets = 0
    for part in range(6):
        send(producer, jobs[part * 4 : part * 4 + 4])
        due = began + 2 * (part + 1)
        wait_until(lambda due=due: time.monotonic() >= due, 3, what="2 s")
        resets += proxy.reset_all()
    assert resets > 0
    noticed(worker, offset, began, LOST)

    assert_each_answered_once_and_ok(client, jobs, 90)
    assert worker.alive


def test_200_ms_of_latency_each_way_slows_jobs_down_and_answers_every_one_ok(
    proxy: TcpProxy, worker: Worker, producer: Celery, client: redis.Redis
) -> None:
    jobs = mixed_jobs(4, "slow", WEIGHTS)  # one of each kind, and a second partition
    proxy.latency = 0.2

    send(producer, jobs)

    assert_each_answered_once_and_ok(client, jobs, 120)
    assert worker.alive
