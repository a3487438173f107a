"""Pool children that die together, then a lost Redis connection: the worker carries on.

Under a partition the hard time limit kills every pool child waiting on Redis at once,
and the connection loss restarts Celery's consumer, which registers the pool with the
event loop again. Celery's pool forgot the sentinel of a live replacement child when
both exits reached the loop in one turn (workers/prefork.py), and the next
registration made the worker exit (``Unrecoverable error: ValueError('file descriptor
is None')``, issue #29). Here the children die while the worker's main process is
stopped, so both exits are read in one turn every time, and every connection the worker
has to Redis is then killed.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery

from tests.conftest import load_example, own_redis_server
from tests.integration.conftest import client_of, producer_of, worker_env
from tests.support.processes import RedisServer, Worker, running_worker, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker]

ROUNDS = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    # Its own redis-server: the test kills every connection to it.
    yield from own_redis_server(tmp_path_factory.mktemp("redis"))


@pytest.fixture
def client(server: RedisServer) -> Iterator[redis.Redis]:
    yield from client_of(server)


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Celery]:
    yield from producer_of(server)


def children(worker: Worker) -> set[int]:
    assert worker.proc is not None
    return set(worker.pool_pids()) - {worker.proc.pid}


def answer_to_a_job(worker: Worker, producer: Celery) -> str:
    """The status a job sent now is answered with ("gone" if the worker exited first)."""
    job = {**load_example("partition.json"), "job_id": f"children-{uuid.uuid4()}"}
    result = producer.send_task("apportion.partition", args=[job])
    wait_until(lambda: result.ready() or not worker.alive, 60, what="an answer")
    if not result.ready():
        return "gone"
    status: str = result.get(timeout=1)["status"]
    return status


def test_a_worker_whose_pool_children_died_together_survives_its_next_reconnection(
    server: RedisServer,
    client: redis.Redis,
    producer: Celery,
    tmp_path: Path,
) -> None:
    with running_worker(worker_env(server.url), tmp_path / "worker.log") as worker:
        assert worker.proc is not None
        main = worker.proc.pid
        for _ in range(ROUNDS):
            dying = children(worker)
            assert len(dying) == 2
            os.kill(main, signal.SIGSTOP)
            try:
                for pid in dying:
                    os.kill(pid, signal.SIGKILL)
                # Zombies until the main process reaps them: no longer counted.
                wait_until(lambda dying=dying: not children(worker) & dying, 10, what="exits")
            finally:
                os.kill(main, signal.SIGCONT)
            wait_until(
                lambda dying=dying: len(children(worker) - dying) == 2, 30, what="replacements"
            )
            offset = len(worker.log_text())

            killed = client.client_kill_filter(_type="normal")

            assert killed > 0
            wait_until(
                lambda offset=offset: "Connection to broker lost" in worker.log_text()[offset:],
                30,
                what="the consumer's reconnection",
            )
            assert answer_to_a_job(worker, producer) == "ok"
        assert worker.alive
        assert "Unrecoverable" not in worker.log_text()
