"""Integration fixtures: a real Celery worker process against the test redis-server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery

from apportion import kinds
from apportion.config.settings import Settings
from apportion.workers.app import create_app
from apportion.workers.redis.keys import Keys
from tests.support.processes import RedisServer, Worker, running_worker

pytestmark = [pytest.mark.redis, pytest.mark.worker]


# Celery's own "received"/"succeeded" lines, which the fault tests read to tell which
# worker was handed which job (apportion logs one line per job, after it ran).
CELERY_TASK_LINES = {"APPORTION_LOG_CELERY_TASK_LINES": "true"}


def short_redelivery(visibility: int, soft: int, hard: int) -> dict[str, str]:
    """Worker settings for fault tests: a visibility timeout short enough that a job
    whose worker died comes back within the test, and every queue's time limits below
    it (Settings refuses a visibility timeout not longer than every hard limit)."""
    env = {
        "APPORTION_VISIBILITY_TIMEOUT": str(visibility),
        "APPORTION_UNACKED_RESTORE_INTERVAL": "1",
    }
    for queue in kinds.queues():
        env[f"APPORTION_TIME_LIMITS__{queue.upper()}__SOFT"] = str(soft)
        env[f"APPORTION_TIME_LIMITS__{queue.upper()}__HARD"] = str(hard)
    return env


def worker_env(url: str, **extra: str) -> dict[str, str]:
    return {"APPORTION_REDIS_URL": url, "PYTHONUNBUFFERED": "1", **extra}


@pytest.fixture(scope="module")
def worker(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    with running_worker(worker_env(redis_server.url), log) as w:
        yield w


def producer_of(server: RedisServer) -> Iterator[Celery]:
    """The producer side: the same app configuration a service would use to send by name
    (for a fixture of a file that starts its own ``server``)."""
    app = create_app(Settings(redis_url=server.url))
    yield app
    app.close()


def client_of(server: RedisServer) -> Iterator[redis.Redis]:
    c = server.client()
    yield c
    c.close()


@pytest.fixture(scope="module")
def producer(redis_server: RedisServer) -> Iterator[Celery]:
    yield from producer_of(redis_server)


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    yield from client_of(redis_server)


@pytest.fixture
def keys() -> Keys:
    return Keys()


def stream_job_ids(client: redis.Redis, stream: str) -> list[str]:
    return [fields[b"job_id"].decode() for _, fields in client.xrange(stream)]


def log_path(tmp_path: Path, name: str) -> Path:
    return tmp_path / f"{name}.log"
