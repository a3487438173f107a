"""Open connections frozen, every connection reset every 2 s, 200 ms of latency each way
between the worker and Redis (the package's docstring)."""

from __future__ import annotations

import time

import pytest
import redis
from celery import Celery

from tests.integration.faults_partition.rig import (
    LOST,
    STALE,
    UNREACHABLE,
    WEIGHTS,
    assert_each_answered_once_and_ok,
    log_from,
    noticed,
    send,
)
from tests.support.jobs import mixed_jobs
from tests.support.processes import Worker, wait_until
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.slow, pytest.mark.long]


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
