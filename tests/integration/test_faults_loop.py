"""Behind a partition the worker's event loop keeps turning, so time limits fire on time.

The main process's event loop fires the time limits (the soft limit's signal, the hard
limit's kill). Its periodic Redis calls (the transport's retry timer, kombu's unacked
sweep and binding refresh, acknowledgements) would each wait a reply timeout behind a
blackhole and hold the loop meanwhile. Once the worker's reachability watch has found
Redis unreachable, they wait for it to answer again instead.

The worker (tests/support/fault_app.py) runs one job at a time, logs whenever its loop
went more than a second without a turn, and its jobs sleep in the engine for longer
than their soft limit.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from celery import Celery

from tests.conftest import own_redis_server
from tests.integration.conftest import (
    CELERY_TASK_LINES,
    producer_of,
    short_redelivery,
    worker_env,
)
from tests.support.jobs import SMALL_PARTITION
from tests.support.processes import RedisServer, Worker, wait_until
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.slow]

SOFT, HARD, VISIBILITY = 10, 14, 30
UNREACHABLE = "Redis unreachable from this worker"
HELD = "the event loop was held for"


def logged_at(line: str) -> float:
    """When the worker logged ``line`` ([2026-12-07 22:21:17,177: ...]), in seconds."""
    stamp = line[1 : line.index(": ")]
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def held_for(line: str) -> float:
    """The seconds in a line ``… the event loop was held for 4.1 s``."""
    return float(line.rsplit(HELD, 1)[1].split()[0])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    yield from own_redis_server(tmp_path / "redis")


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Celery]:
    yield from producer_of(server)


def test_behind_a_blackhole_the_loop_keeps_turning_and_signals_the_soft_limit_on_time(
    server: RedisServer, producer: Celery, tmp_path: Path
) -> None:
    with TcpProxy("127.0.0.1", server.port) as proxy:
        env = worker_env(
            proxy.url,
            **CELERY_TASK_LINES,
            **short_redelivery(VISIBILITY, SOFT, HARD),
            # Each Redis call waits 2 s for a reply at most (the watch's probe too).
            APPORTION_REDIS_SOCKET_TIMEOUT="2",
            APPORTION_TEST_SLOW_SOLVE="60",
            APPORTION_TEST_LOOP_WATCH="1",
        )
        worker = Worker(
            env=env,
            logfile=tmp_path / "w.log",
            app_module="tests.support.fault_app",
            queues="partition",
            concurrency=1,
        )
        worker.start()
        try:
            job = {**SMALL_PARTITION, "job_id": f"loop-{time.monotonic_ns()}"}
            sent = producer.send_task("apportion.partition", args=[job])
            wait_until(
                lambda: f"[{sent.id}] received" in worker.log_text(), 30, what="the job taken"
            )
            started = time.monotonic()
            proxy.set_blackhole(True)
            wait_until(lambda: UNREACHABLE in worker.log_text(), 15, what="the outage noticed")
            # The soft limit is due SOFT s after the job started; a pool child raises it
            # itself 1 s later if the main process has not signalled it by then.
            wait_until(lambda: time.monotonic() - started >= SOFT + 2, SOFT + 3, what="limit")
            log = worker.log_text()
            proxy.set_blackhole(False)
            assert worker.alive
        finally:
            worker.stop()

    lines = log.splitlines()
    noticed = logged_at(next(line for line in lines if UNREACHABLE in line))
    # A call sent before the watch noticed may still hold the loop for its reply
    # timeout; none may start after.
    held = [line for line in lines if HELD in line]
    assert [line for line in held if logged_at(line) - held_for(line) > noticed] == []
    signalled = [
        line for line in log.splitlines() if f"exceeded for apportion.partition[{sent.id}]" in line
    ]
    assert signalled
    assert "Soft time limit" in signalled[0]
    assert "did not signal the soft time limit" not in log
