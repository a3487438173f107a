"""Flower, as operators run it (`celery -A apportion.workers.flower flower` with basic
authentication), against a real worker: credentials required, each task's answer shown
as a preview of its envelope (a rejected job visibly rejected), and events followed
again right after a Redis outage."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from apportion.config.celeryconfig import celery_config
from apportion.config.settings import Settings
from apportion.workers.app import create_app
from apportion.workers.flower import FlowerApp
from apportion.workers.producer import JobSender, args_preview, producer_app
from tests.conftest import load_example, own_redis_server
from tests.integration.conftest import worker_env
from tests.support.processes import REPO, RedisServer, Worker, free_port, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.serial]

USER, PASSWORD = "operator", "s3cret-pass"


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """This module restarts Redis: a server of its own, with an append-only file."""
    yield from own_redis_server(tmp_path_factory.mktemp("flower-redis"), appendonly=True)


@pytest.fixture(scope="module")
def flower_worker(
    own_redis: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Worker]:
    log = tmp_path_factory.mktemp("flower-worker") / "worker.log"
    worker = Worker(env=worker_env(own_redis.url), logfile=log, concurrency=1)
    worker.start()
    yield worker
    worker.stop()


@pytest.fixture(scope="module")
def flower(
    own_redis: RedisServer, flower_worker: Worker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("flower") / "flower.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "apportion.workers.flower",
                "flower",
                "--address=127.0.0.1",
                f"--port={port}",
            ],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={
                "PATH": "/usr/bin:/bin",
                "APPORTION_REDIS_URL": own_redis.url,
                "FLOWER_BASIC_AUTH": f"{USER}:{PASSWORD}",
            },
        )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            with urllib.request.urlopen(f"{base}/healthcheck", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        wait_until(up, 60, what="flower listening")
        # Workers send task events once a monitor asks (config/celeryconfig.py): Flower
        # asks as soon as it follows events (apportion.workers.flower), then every 5 s.
        wait_until(
            lambda: "Events of group {task} enabled by remote" in flower_worker.log_text(),
            15,
            what="Flower switching the worker's task events on",
        )
        time.sleep(1.0)  # let Flower subscribe to the event stream before we send
        yield base
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.fixture(scope="module")
def producer(own_redis: RedisServer) -> Iterator[Celery]:
    app = producer_app(Settings(redis_url=own_redis.url))
    yield app
    app.close()


def _get(url: str, *, auth: bool = True) -> Any:
    request = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def _listed(flower: str, task_id: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def succeeded() -> bool:
        task = _get(f"{flower}/api/tasks").get(task_id) or {}
        found.update(task)
        return task.get("state") == "SUCCESS"

    wait_until(succeeded, 30, what=f"task {task_id} in Flower")
    return found


def test_flowers_api_refuses_a_caller_without_credentials(flower: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        _get(f"{flower}/api/tasks", auth=False)

    assert refused.value.code == 401


def test_a_rejected_job_is_visibly_rejected_with_a_readable_preview(
    flower_worker: Worker, flower: str, producer: Celery
) -> None:
    job_id = f"flower-bad-{uuid.uuid4()}"
    job = {"job_id": job_id, "schema": [], "hardware": {}}
    result = JobSender(producer).send("apportion.partition", job)  # as apportion submit sends
    envelope = result.get(timeout=60)

    task = _listed(flower, result.id)

    assert envelope["status"] == "rejected"  # what producers get is the envelope, unchanged
    assert task["result"].startswith("REJECTED invalid_job: ")
    assert f"(job {job_id}, " in task["result"]
    assert task["args"] == args_preview(job)  # the job's top level, as the sender wrote it
    assert job_id in task["args"]
    rejected = _get(f"{flower}/api/tasks?search=result:REJECTED")
    assert result.id in rejected


def test_an_answered_job_shows_ok_with_its_job_and_result_fields(
    flower_worker: Worker, flower: str, producer: Celery
) -> None:
    job_id = f"flower-ok-{uuid.uuid4()}"
    result = producer.send_task(
        "apportion.partition", args=[{**load_example("partition.json"), "job_id": job_id}]
    )
    assert result.get(timeout=60)["status"] == "ok"

    task = _listed(flower, result.id)

    assert task["result"].startswith(f"OK (job {job_id}, ")
    assert task["result"].endswith("result: disks, volume_groups, partitions")


def test_flower_follows_events_again_right_after_a_redis_outage(
    flower_worker: Worker, flower: str, own_redis: RedisServer, producer: Celery
) -> None:
    own_redis.stop()
    time.sleep(4)  # Flower's own loop fails while Redis is away
    own_redis.start()
    back = time.monotonic()
    job_id = f"flower-after-{uuid.uuid4()}"
    result = producer.send_task(
        "apportion.partition", args=[{**load_example("partition.json"), "job_id": job_id}]
    )
    assert result.get(timeout=90)["job_id"] == job_id

    _listed(flower, result.id)

    assert time.monotonic() - back < 30


def test_flowers_event_connection_waits_for_redis_instead_of_failing(tmp_path: Path) -> None:
    # Flower doubles its sleep after every failed attempt (it went blind for as long as
    # Redis had been away); the connection it asks for waits for Redis instead.
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    settings = Settings(redis_url=url)
    stock = create_app(settings, broker=url, backend=url)
    flower = FlowerApp("apportion", set_as_current=False)
    flower.config_from_object(celery_config(settings))
    outcome: dict[str, Any] = {}

    def connect() -> None:
        try:
            flower.connection().default_channel  # noqa: B018 - connecting is the point
            outcome["connected"] = time.monotonic()
        except Exception as exc:  # pragma: no cover - the failure this test guards
            outcome["error"] = exc

    with pytest.raises(Exception):  # noqa: B017, PT011 - kombu's, as stock Flower sees it
        stock.connection().default_channel  # noqa: B018
    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    time.sleep(6)
    assert outcome == {}  # still waiting, where the stock connection has given up
    server = RedisServer(port=port, workdir=tmp_path)
    server.start()
    try:
        thread.join(15)
        assert "connected" in outcome, outcome
    finally:
        server.stop()
