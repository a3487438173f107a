"""Partitions between a worker and Redis: the pool child enforces its own soft limit
when the main process's loop is held on Redis, the launcher's history writes are Redis
time, every connection's reply timeout stays below the soft limits, a late hard limit
requeues, and worker events never wait on a partition (workers/job_clock.py,
workers/heartbeat.py, workers/redis/reachability.py)."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from celery.exceptions import SoftTimeLimitExceeded

from apportion.config.celeryconfig import celery_config
from apportion.config.settings import Settings
from apportion.contracts.events import LaunchOutcomeJob
from apportion.errors import StoreUnavailable
from apportion.workers import job_clock
from apportion.workers.broker.requests import LATE_HARD_LIMIT, _late_by, _not_the_jobs
from apportion.workers.heartbeat import BoundedDispatcher
from apportion.workers.job_clock import (
    GRACE,
    engine_seconds,
    job_ended,
    job_started,
    waiting_on_redis,
)
from apportion.workers.launch.launcher import LaunchOutcome, launch_with_retries
from apportion.workers.redis import reachability
from apportion.workers.redis.reachability import Reachability

from .test_job_clock import _pool_handler


@pytest.fixture
def pool_child() -> Iterator[None]:
    """This process as a pool child: billiard's SIGUSR1 handler, no job running."""
    usr1 = signal.signal(signal.SIGUSR1, _pool_handler)
    alrm = signal.getsignal(signal.SIGALRM)
    job_clock._CLOCK.pid = 0
    try:
        yield
    finally:
        job_ended()
        job_clock._CLOCK.gated = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGUSR1, usr1)
        signal.signal(signal.SIGALRM, alrm if alrm is not None else signal.SIG_DFL)


def task(soft: float | None, message_soft: float | None = None) -> Any:
    return SimpleNamespace(
        soft_time_limit=soft, request=SimpleNamespace(timelimit=(None, message_soft))
    )


def engine_for(seconds: float) -> None:
    """The engine, running (in Python) past its limit."""
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        time.sleep(0.01)


def test_a_pool_child_raises_its_soft_limit_itself_when_the_main_process_never_signals(
    pool_child: None,
) -> None:
    job_started(task=task(0.2))
    began = time.monotonic()
    with pytest.raises(SoftTimeLimitExceeded):
        engine_for(5)
    assert 0.2 + GRACE - 0.1 <= time.monotonic() - began < 0.2 + GRACE + 1


def test_a_job_gets_one_soft_limit_whoever_signals_it(pool_child: None) -> None:
    job_started(task=task(0.2))
    with pytest.raises(SoftTimeLimitExceeded):
        signal.raise_signal(signal.SIGUSR1)  # the main process, on time
    time.sleep(0.2 + GRACE + 0.2)  # the child's own timer comes and goes: nothing raised
    signal.raise_signal(signal.SIGUSR1)  # a second signal for the same job: ignored


def test_a_job_that_ends_before_its_limit_leaves_no_timer_behind(pool_child: None) -> None:
    job_started(task=task(0.1))
    job_ended()
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    time.sleep(0.1 + GRACE + 0.1)  # nothing fires


def test_the_soft_limit_a_message_carries_comes_before_the_tasks_own() -> None:
    assert job_clock.soft_limit_of(task(60, message_soft=3)) == 3
    assert job_clock.soft_limit_of(task(60)) == 60
    assert job_clock.soft_limit_of(None) is None


class SlowHistory:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.recorded: list[str] = []

    def record(self, event: LaunchOutcomeJob, now: Any, digest: str | None = None) -> Any:
        time.sleep(self.seconds)
        self.recorded.append(event.event_id)

    def counts(self, *args: Any) -> dict[str, int]:
        return {}


class NeverAnswers(SlowHistory):
    def record(self, event: LaunchOutcomeJob, now: Any, digest: str | None = None) -> Any:
        raise SoftTimeLimitExceeded()  # the limit lands while Redis has not answered


def launched(history: Any) -> Any:
    from datetime import UTC, datetime

    from apportion.contracts import Envelope

    envelope = Envelope(
        status="ok",
        job_id="j-1",
        kind="launch_select",
        engine_version="test",
        elapsed_ms=0.0,
        result={
            "selection": {
                "account": "a",
                "chosen": 0,
                "roll": 0.5,
                "groups": [{"probabilities": {}}],
            },
            "allocation_requests": [{}],
        },
    )
    return launch_with_retries(
        envelope,
        {"job_id": "j-1"},
        launcher=SimpleNamespace(launch=lambda *a: LaunchOutcome(True)),
        history=history,
        attempts=1,
        now=lambda: datetime(2026, 12, 7, tzinfo=UTC),
        reselect=lambda job: envelope,
    )


def test_the_launchers_history_write_is_redis_time_not_the_engines(pool_child: None) -> None:
    history = SlowHistory(0.4)
    job_started()
    launched(history)
    assert history.recorded == ["j-1/launch-1"]
    assert engine_seconds() < 0.2


def test_a_soft_limit_in_the_launchers_history_write_is_an_outage(pool_child: None) -> None:
    job_started()
    with pytest.raises(StoreUnavailable, match="recording a launch attempt"):
        launched(NeverAnswers(0))


def limits(soft: int, hard: int) -> dict[str, Any]:
    queues = ("partition", "launch", "attach", "events")
    return {"time_limits": {q: {"soft": soft, "hard": hard} for q in queues}}


def test_the_reply_timeout_is_lowered_to_half_the_shortest_soft_limit() -> None:
    assert Settings(redis_socket_timeout=10, **limits(4, 6)).reply_timeout == 2.0
    assert Settings(redis_socket_timeout=1.5, **limits(4, 6)).reply_timeout == 1.5
    assert Settings(redis_socket_timeout=10, **limits(1, 2)).reply_timeout == 0.5
    # Every connection Celery makes waits that long at most.
    conf = celery_config(Settings(redis_socket_timeout=10, **limits(4, 6)))
    assert conf["broker_transport_options"]["socket_timeout"] == 2.0
    assert conf["redis_socket_timeout"] == 2.0


def test_a_hard_limit_that_fires_late_is_told_from_one_on_time() -> None:
    now = time.time()
    assert _late_by(now - 6.1, 6) < LATE_HARD_LIMIT
    assert _late_by(now - 20, 6) > LATE_HARD_LIMIT
    assert _late_by(None, 6) > LATE_HARD_LIMIT


class Pings:
    def __init__(self) -> None:
        self.down = False

    def __call__(self) -> bool:
        if self.down:
            raise redis.TimeoutError("Timeout reading from socket")
        return True


def test_a_lost_redis_is_logged_once_and_its_return_with_the_outage_length(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ping, now = Pings(), [100.0]
    watch = Reachability(ping, clock=lambda: now[0])
    caplog.set_level(logging.INFO, "apportion.workers")
    assert watch.check()
    assert watch.reachable
    ping.down = True
    assert not watch.check()
    now[0] += 7
    assert not watch.check()
    ping.down = False
    assert watch.check()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith("Redis unreachable from this worker (Timeout reading from socket)")
    assert lines[1] == "Redis reachable again after 7.0 s"


def test_the_watch_thread_notices_a_lost_redis_within_its_interval() -> None:
    ping = Pings()
    watch = Reachability(ping, interval=0.05)
    reachability.watch(watch)
    try:
        ping.down = True
        deadline = time.monotonic() + 5
        while not reachability.unreachable() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert reachability.unreachable()
    finally:
        reachability.watch(None)
    assert not reachability.unreachable()


class Producer:
    def __init__(self) -> None:
        self.published: list[tuple[str, Any]] = []

    def publish(self, event: Any, **options: Any) -> None:
        self.published.append((options["routing_key"], options["retry"]))


def dispatcher() -> tuple[BoundedDispatcher, Producer]:
    from apportion.workers.app import create_app

    app = create_app(Settings())
    sent = BoundedDispatcher(app.connection_for_write(), hostname="w@h", app=app, enabled=False)
    producer = Producer()
    sent.producer, sent.enabled = producer, True
    return sent, producer


def test_heartbeats_are_published_once_without_kombus_reconnection_loop() -> None:
    sent, producer = dispatcher()
    sent.send("worker-heartbeat", retry=True, freq=2.0)
    assert producer.published == [("worker.heartbeat", False)]


def test_no_heartbeat_is_published_into_a_partition() -> None:
    ping = Pings()
    ping.down = True
    watch = Reachability(ping, interval=3600)
    watch.check()
    reachability._watch = watch  # installed without its thread
    try:
        sent, producer = dispatcher()
        sent.send("worker-heartbeat", retry=True, freq=2.0)
        assert producer.published == []
        ping.down = False
        watch.check()
        sent.send("worker-heartbeat", retry=True, freq=2.0)
        assert producer.published == [("worker.heartbeat", False)]
    finally:
        reachability._watch = None


def test_the_main_process_sees_when_a_child_waits_on_redis_or_publishes(
    pool_child: None,
) -> None:
    pid = os.getpid()
    job_started()
    assert job_clock.infrastructure_since(pid) is None  # the engine runs
    with waiting_on_redis("reading the policy store"):
        assert job_clock.infrastructure_since(pid) is not None
        assert _not_the_jobs(pid, time.time() - 6.1, 6) is not None
    assert job_clock.infrastructure_since(pid) is None
    assert _not_the_jobs(pid, time.time() - 6.1, 6) is None  # the engine's own limit
    job_clock.engine_done()  # solved: publishing from here
    assert "waiting on Redis" in (_not_the_jobs(pid, time.time() - 6.1, 6) or "")
    job_ended()
    assert job_clock.infrastructure_since(pid) is None


def test_the_infrastructure_mark_crosses_into_the_main_process_after_fork() -> None:
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the pool child
        os.close(read)
        job_started()
        with waiting_on_redis("publishing"):
            os.write(write, b"x")
            time.sleep(5)
        os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 1) == b"x"
        assert job_clock.infrastructure_since(child) is not None
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        os.close(read)


def test_a_job_whose_redis_wait_failed_stays_on_redis_time_while_it_is_retried(
    pool_child: None,
) -> None:
    pid = os.getpid()
    job_started()
    with pytest.raises(StoreUnavailable), waiting_on_redis("reading the policy store"):
        raise SoftTimeLimitExceeded()
    # Sending the retry waits on the same Redis: a hard limit there is not the job's.
    assert job_clock.infrastructure_since(pid) is not None
    job_ended()
    job_started()
    time.sleep(0.1)
    assert not job_clock.limit_is_the_engines(3.0)  # a stall's limit: retried
    assert job_clock.infrastructure_since(pid) is not None
