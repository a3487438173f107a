"""Quarantine counts deliveries that reached a worker, whatever Redis does meanwhile.

A message is quarantined after ``APPORTION_QUARANTINE_AFTER`` deliveries (2 here, the
default) whose workers died. Two faults of Redis's own must not move that count or
hold the message back:

* the reply to the take's record (the MULTI/EXEC that moves the message into
  ``unacked`` and counts the delivery) is lost after Redis ran it: the take delivered
  nothing, so it counts nothing, and the message runs again within seconds, not after
  the visibility timeout;
* Redis refuses to write the dead letter (out of memory): the message goes back on its
  queue and is buried within seconds of Redis accepting writes again, not left in
  ``unacked`` until the visibility timeout (an hour here, the default).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery

from apportion.workers.redis.keys import Keys
from tests.conftest import NO_EVICTION, own_redis_server
from tests.integration.conftest import (
    CELERY_TASK_LINES,
    client_of,
    producer_of,
    short_redelivery,
    worker_env,
)
from tests.integration.test_faults_out_of_memory import fill_up
from tests.support.processes import RedisServer, Worker, wait_until
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.slow]

KEYS = Keys()
FAULT_APP = "tests.support.fault_app"
# Short, so that today's alternative (the record's message left in ``unacked``) would
# come back within the test; the undo brings it back within a reply timeout.
VISIBILITY = 10


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    yield from own_redis_server(tmp_path / "redis")


@pytest.fixture
def producer(server: RedisServer) -> Iterator[Celery]:
    yield from producer_of(server)


@pytest.fixture
def client(server: RedisServer) -> Iterator[redis.Redis]:
    yield from client_of(server)


def dead_letters(client: redis.Redis) -> list[dict[bytes, bytes]]:
    return [fields for _, fields in client.xrange(KEYS.dead_letters_stream)]


def test_a_take_whose_record_lost_its_reply_is_not_counted_as_a_delivery(
    server: RedisServer, producer: Celery, client: redis.Redis, tmp_path: Path
) -> None:
    # The job kills its pool child each time it runs. The reply to the record of its
    # first take is lost after Redis ran it (the worker's connection freezes): that
    # take never reached a pool child. Quarantine must still wait for two deliveries
    # that did, and the job must not sit in ``unacked`` until the visibility timeout.
    with TcpProxy("127.0.0.1", server.port) as proxy:
        env = worker_env(proxy.url, **CELERY_TASK_LINES, **short_redelivery(VISIBILITY, 3, 4))
        worker = Worker(
            env=env,
            logfile=tmp_path / "w.log",
            app_module=FAULT_APP,
            queues="partition",
            concurrency=1,
        )
        worker.start()
        try:
            # MULTI … INCR {prefix}:deliveries:<tag> … EXEC: the take's record only.
            proxy.lose_reply_to(b"MULTI", b"INCR", KEYS.delivery_count_prefix.encode())
            sent = producer.send_task("apportion.test.crash", args=[{}], queue="partition")
            wait_until(lambda: dead_letters(client), 60, interval=0.2, what="quarantined")
            assert worker.alive
            log = worker.log_text()
        finally:
            worker.stop()

    assert proxy.replies_lost == 1
    [letter] = dead_letters(client)
    assert letter[b"reason"] == b"quarantined"
    assert letter[b"task_id"] == sent.id.encode()
    # Two deliveries reached a pool child and killed it; the one whose record's reply
    # was lost is not among them (counted, it would have left room for one only).
    assert log.count(f"apportion.test.crash[{sent.id}] received") == 2
    assert b"2 times" in letter[b"detail"]
    assert "uncounted: its take delivered nothing" in log
    assert client.hlen("unacked") == 0
    assert client.llen("partition") == 0
    assert list(client.scan_iter(f"{KEYS.delivery_count_prefix}*")) == []


def _queued(tag: str, task: str = "apportion.partition") -> bytes:
    """A message as a Celery producer queues it, with a delivery tag of our choosing."""
    return json.dumps(
        {
            "body": "W1tdLCB7fSwge31d",  # [[], {}, {}]
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {"id": tag, "task": task},
            "properties": {
                "delivery_tag": tag,
                "delivery_info": {"exchange": "", "routing_key": "partition"},
                "body_encoding": "base64",
            },
        }
    ).encode()


@pytest.fixture
def full_server(tmp_path: Path) -> Iterator[RedisServer]:
    yield from own_redis_server(tmp_path / "redis", extra_args=NO_EVICTION)


def test_messages_redis_refuses_to_dead_letter_are_buried_within_seconds_of_memory_freed(
    full_server: RedisServer, tmp_path: Path
) -> None:
    # Two messages a worker takes while Redis is out of memory, each to be buried: one
    # handed out twice already (each time its worker died: quarantined now), one not
    # JSON. Redis refuses both dead letters; neither may wait for the visibility
    # timeout (an hour, the default) once it takes writes again.
    admin = full_server.client()
    worker = Worker(env=worker_env(full_server.url), logfile=tmp_path / "w.log", queues="partition")
    worker.start()
    try:
        worker.pause()
        admin.set(KEYS.delivery_count("at-limit-1"), 2)
        admin.lpush("partition", _queued("at-limit-1"), b"not json {")
        fill_up(admin)
        worker.resume()

        def refused() -> int:
            return worker.log_text().count("could not be recorded")

        wait_until(lambda: refused() >= 3, 30, interval=0.2, what="burials refused")
        assert admin.xlen(KEYS.dead_letters_stream) == 0
        admin.config_set("maxmemory", 0)
        freed = time.monotonic()
        wait_until(
            lambda: admin.xlen(KEYS.dead_letters_stream) == 2, 15, interval=0.1, what="buried"
        )
        seconds = time.monotonic() - freed
        assert worker.alive
    finally:
        worker.stop()

    reasons = {f[b"reason"]: f[b"tag"] for _, f in admin.xrange(KEYS.dead_letters_stream)}
    assert reasons == {b"quarantined": b"at-limit-1", b"not_json": b""}
    [quarantined] = [f for _, f in admin.xrange(KEYS.dead_letters_stream) if f[b"tag"]]
    assert b"2 times" in quarantined[b"detail"]  # the refused takes counted nothing
    assert admin.hlen("unacked") == 0
    assert admin.llen("partition") == 0
    assert admin.get(KEYS.delivery_count("at-limit-1")) is None
    assert "CRITICAL" not in worker.log_text()
    print(f"\nboth buried {seconds:.1f} s after memory was freed")
    admin.close()
