"""A message whose delivery kills a worker is quarantined, not restored for ever.

Counted per delivery: each time the message is handed to a worker and the delivery
ends with that worker (or its pool child) dead, its count grows; after
APPORTION_QUARANTINE_AFTER deliveries (2 here, the default) the next one puts it on
the dead-letter stream instead, and the worker goes on serving. `apportion
dead-letters --requeue` gives it fresh attempts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery

from apportion.config.settings import Settings
from apportion.workers.app import create_app
from apportion.workers.redis.keys import Keys
from tests.conftest import load_example
from tests.integration.conftest import CELERY_TASK_LINES, worker_env
from tests.support.processes import (
    REPO,
    RedisServer,
    Worker,
    group_pids,
    parent_pid,
    wait_until,
)

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.slow]

KEYS = Keys()
FAULT_APP = "tests.support.fault_app"


@pytest.fixture
def url(redis_server: RedisServer) -> str:
    url = f"redis://127.0.0.1:{redis_server.port}/9"
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture
def client(url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(url, socket_timeout=5)
    yield c
    c.close()


@pytest.fixture
def producer(url: str) -> Iterator[Celery]:
    app = create_app(Settings(redis_url=url))
    yield app
    app.close()


def quarantined(client: redis.Redis) -> list[dict[bytes, bytes]]:
    return [
        fields
        for _, fields in client.xrange(KEYS.dead_letters_stream)
        if fields[b"reason"] == b"quarantined"
    ]


def still_serving(producer: Celery, client: redis.Redis) -> None:
    job = {**load_example("partition.json"), "job_id": f"after-{uuid.uuid4()}"}
    assert producer.send_task("apportion.partition", args=[job]).get(timeout=60)["status"] == "ok"
    # The answer is out before the worker acknowledges the job; stopping the worker in
    # between would give the job back (acks late), harmlessly, but not what is tested.
    wait_until(lambda: client.hlen("unacked") == 0, 10, what="the job acknowledged")


def test_a_job_that_kills_its_pool_child_is_quarantined_after_two_deliveries(
    url: str, client: redis.Redis, producer: Celery, tmp_path: Path
) -> None:
    worker = Worker(
        env=worker_env(url), logfile=tmp_path / "w.log", app_module=FAULT_APP, queues="partition"
    )
    worker.start()
    try:
        sent = producer.send_task("apportion.test.crash", args=[{}], queue="partition")
        wait_until(lambda: quarantined(client), 90, what="the crashing job quarantined")
        still_serving(producer, client)
        assert worker.alive
    finally:
        worker.stop()

    [letter] = quarantined(client)
    assert letter[b"task_id"] == sent.id.encode()
    # Its two deliveries each killed a pool child: the letter counts them (the count of
    # the worker's "WorkerLostError" lines would also count a child that the SIGTERM of
    # worker.stop() ended while it finished the last job, whose answer was already out).
    assert b"2 times" in letter[b"detail"]
    assert client.llen("partition") == 0
    assert client.hlen("unacked") == 0


def _redelivering_env(url: str) -> dict[str, str]:
    """A worker whose killed deliveries come back within seconds (a 6 s visibility
    timeout, longer than every hard time limit), logging Celery's "received" lines,
    which these tests read."""
    return worker_env(
        url,
        **CELERY_TASK_LINES,
        APPORTION_VISIBILITY_TIMEOUT="6",
        APPORTION_UNACKED_RESTORE_INTERVAL="1",
        **{f"APPORTION_TIME_LIMITS__{q}__SOFT": "3" for q in ("ATTACH", "LAUNCH", "EVENTS")},
        **{f"APPORTION_TIME_LIMITS__{q}__HARD": "4" for q in ("ATTACH", "LAUNCH", "EVENTS")},
        APPORTION_TIME_LIMITS__PARTITION__SOFT="4",
        APPORTION_TIME_LIMITS__PARTITION__HARD="5",
    )


def test_a_job_whose_worker_is_killed_twice_is_quarantined_and_can_be_requeued(
    url: str, client: redis.Redis, producer: Celery, tmp_path: Path
) -> None:
    # The whole worker (main process and children) is SIGKILLed while the job runs,
    # twice: each time the message comes back after the visibility timeout.
    env = _redelivering_env(url)
    sent = producer.send_task("apportion.test.sleep", args=[{"seconds": 3}], queue="partition")
    for attempt in range(2):
        worker = Worker(
            env=env, logfile=tmp_path / f"w{attempt}.log", app_module=FAULT_APP, queues="partition"
        )
        worker.start()
        wait_until(
            lambda w=worker: f"{sent.id}] received" in w.log_text(), 30, what="the job taken"
        )
        worker.kill()
        assert client.hlen("unacked") == 1

    survivor = Worker(
        env=env, logfile=tmp_path / "w2.log", app_module=FAULT_APP, queues="partition"
    )
    survivor.start()
    try:
        wait_until(lambda: quarantined(client), 60, what="the job quarantined")
        still_serving(producer, client)
        assert f"{sent.id}] received" not in survivor.log_text()

        [(entry_id, _)] = [
            (e, f)
            for e, f in client.xrange(KEYS.dead_letters_stream)
            if f[b"reason"] == b"quarantined"
        ]
        listed = subprocess.run(
            [sys.executable, "-m", "apportion.cli", "dead-letters", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
            env=_env(env),
            check=True,
        )
        assert [e["task_id"] for e in json.loads(listed.stdout)] == [sent.id]
        requeued = subprocess.run(
            [sys.executable, "-m", "apportion.cli", "dead-letters", "--requeue", entry_id.decode()],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
            env=_env(env),
            check=False,
        )
        assert requeued.returncode == 0, requeued.stderr
        # Fresh attempts: this time nobody kills the worker, and the job completes.
        assert sent.get(timeout=60) == {"slept": 3}
    finally:
        survivor.stop()
    assert client.xlen(KEYS.dead_letters_stream) == 0


def _env(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **extra}


def _children(worker: Worker) -> list[int]:
    assert worker.proc is not None
    main = worker.proc.pid
    return [pid for pid in group_pids(main) if parent_pid(pid) == main]


def _sleeping(pid: int) -> bool:
    """Whether process ``pid`` sleeps in ``time.sleep`` (the fault app's slow solve)."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text() == "hrtimer_nanosleep"
    except OSError:
        return False


def test_a_job_answered_before_its_worker_was_killed_twice_is_delivered_again_not_quarantined(
    url: str, client: redis.Redis, producer: Celery, tmp_path: Path
) -> None:
    # The first worker's main process is stopped once its pool child holds the job: the
    # child answers (publishes), and the whole worker is SIGKILLed before the
    # acknowledgement it never got to send. The second worker is SIGKILLed while its
    # child holds the job again. Two deliveries ended with a dead worker, but the job
    # was answered: the third delivery answers it again (from the published envelope)
    # instead of quarantining it "without an answer".
    env = _redelivering_env(url)
    job_id = f"answered-{uuid.uuid4()}"
    sent = producer.send_task(
        "apportion.partition", args=[{**load_example("partition.json"), "job_id": job_id}]
    )
    stream = KEYS.results_stream("partition")
    for attempt in range(2):
        worker = Worker(
            env={**env, "APPORTION_TEST_SLOW_SOLVE": "2"},
            logfile=tmp_path / f"w{attempt}.log",
            app_module=FAULT_APP,
            queues="partition",
        )
        worker.start()
        wait_until(
            lambda w=worker: any(_sleeping(pid) for pid in _children(w)),  # type: ignore[misc]
            60,
            what="a pool child holding the job",
        )
        if attempt == 0:
            assert worker.proc is not None
            os.kill(worker.proc.pid, signal.SIGSTOP)  # the main process only: no ack
            wait_until(lambda: client.xlen(stream) == 1, 30, what="the answer published")
        worker.kill()
        assert client.hlen("unacked") == 1

    survivor = Worker(
        env=env, logfile=tmp_path / "w2.log", app_module=FAULT_APP, queues="partition"
    )
    survivor.start()
    try:
        assert sent.get(timeout=60)["job_id"] == job_id
        wait_until(lambda: client.hlen("unacked") == 0, 30, what="the job acknowledged")
        assert f"{sent.id}] received" in survivor.log_text()
    finally:
        survivor.stop()
    assert quarantined(client) == []
    assert client.xlen(stream) == 1  # answered once
