"""Whose time a soft time limit counts (workers/job_clock.py): the engine's, never the
time spent waiting on Redis, nor the time a frozen child slept; and a soft limit signal
that arrives between jobs is ignored, not raised in the pool's loop."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from apportion.errors import StoreUnavailable
from apportion.workers import job_clock
from apportion.workers.job_clock import (
    engine_seconds,
    job_ended,
    job_started,
    limit_is_the_engines,
    waiting_on_redis,
)


def _pool_handler(signum: int, frame: Any) -> None:
    raise SoftTimeLimitExceeded()


@pytest.fixture
def pool_child() -> Iterator[None]:
    """This process as a pool child: billiard's SIGUSR1 handler, no job running."""
    usr1 = signal.signal(signal.SIGUSR1, _pool_handler)
    cont = signal.getsignal(signal.SIGCONT)
    job_clock._CLOCK.pid = 0  # install again in this test
    try:
        yield
    finally:
        job_ended()
        signal.signal(signal.SIGUSR1, usr1)
        signal.signal(signal.SIGCONT, cont if cont is not None else signal.SIG_DFL)


def test_a_soft_limit_inside_a_redis_call_is_an_outage_to_retry(pool_child: None) -> None:
    job_started()
    with (
        pytest.raises(StoreUnavailable, match="reading the policy store"),
        waiting_on_redis("reading the policy store"),
    ):
        raise SoftTimeLimitExceeded()


def test_time_waiting_on_redis_is_not_the_engines(pool_child: None) -> None:
    job_started()
    with waiting_on_redis("reading the policy store"):
        time.sleep(0.6)
    assert engine_seconds() < 0.3
    # A limit of 0.6 s fired now: the engine spent almost none of it.
    assert not limit_is_the_engines(0.9)


def test_a_limit_the_engine_reached_is_the_engines(pool_child: None) -> None:
    job_started()
    time.sleep(0.6)  # the engine's own time, as far as the clock can tell
    assert limit_is_the_engines(1.0)


def test_a_child_stopped_and_continued_during_the_job_does_not_own_its_limit(
    pool_child: None,
) -> None:
    job_started()
    time.sleep(0.6)
    os.kill(os.getpid(), signal.SIGCONT)  # what a SIGSTOPped child gets on waking
    assert not limit_is_the_engines(1.0)


def test_a_soft_limit_signal_between_jobs_is_ignored_and_during_a_job_raises(
    pool_child: None,
) -> None:
    job_started()
    job_ended()
    os.kill(os.getpid(), signal.SIGUSR1)  # late: its job has ended
    job_started()
    with pytest.raises(SoftTimeLimitExceeded):
        signal.raise_signal(signal.SIGUSR1)


def test_a_stopped_pool_child_is_seen_as_stopped_by_the_main_process() -> None:
    # workers/broker/requests.py: a hard limit that finds its child stopped requeues the
    # job instead of answering it time_limit.
    from apportion.workers.broker.requests import _stopped

    child = subprocess.Popen(["sleep", "30"])
    try:
        assert not _stopped(child.pid)
        os.kill(child.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while not _stopped(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _stopped(child.pid)
        os.kill(child.pid, signal.SIGCONT)
        while _stopped(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not _stopped(child.pid)
    finally:
        child.kill()
        child.wait()
