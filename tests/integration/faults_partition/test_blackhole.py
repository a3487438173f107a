"""A blackhole of 120 s between the worker and Redis (the package's docstring)."""

from __future__ import annotations

import time

import pytest
import redis
from celery import Celery

from tests.integration.faults_partition.rig import (
    KINDS,
    UNREACHABLE,
    WEIGHTS,
    assert_each_answered_once_and_ok,
    log_from,
    noticed,
    send,
    submit_and_wait_through,
)
from tests.support.jobs import event_counts, mixed_jobs
from tests.support.processes import Worker, wait_until
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.slow, pytest.mark.long]

BLACKHOLE = 120.0


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
