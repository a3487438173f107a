"""A real redis-server, the fault-injecting proxy in front of it and a real worker behind
the proxy, once per test file; every test starts and ends with a clean network."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from celery import Celery

from tests.conftest import own_redis_server
from tests.integration.conftest import client_of, producer_of, short_redelivery, worker_env
from tests.integration.faults_partition.rig import log_from
from tests.support.processes import RedisServer, Worker, running_worker
from tests.support.tcp_proxy import TcpProxy

SOFT, HARD, VISIBILITY = 4, 6, 12


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
    yield from producer_of(server)


@pytest.fixture
def client(server: RedisServer) -> Iterator[redis.Redis]:
    yield from client_of(server)


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
