"""A real Redis that answers but cannot write (OOM under maxmemory, a read-only replica)
is an outage to the publisher and the failure store: StoreUnavailable, which the task
retries, and the same call succeeds once the server can write again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from apportion.contracts import Envelope
from apportion.contracts.events import LaunchOutcomeJob
from apportion.errors import StoreUnavailable
from apportion.workers.broker.transport import (
    _FIRST,
    _MOVE_OUT_OF_MEMORY,
    _RESTORE,
    _SETTLE_OUT_OF_MEMORY,
    _UNDO_RECORD,
)
from apportion.workers.history.failure_store import FailureStore
from apportion.workers.redis.client import make_redis
from apportion.workers.redis.direct import DirectScripts
from apportion.workers.redis.keys import Keys
from apportion.workers.results.publisher import StreamPublisher
from tests.conftest import NO_EVICTION, own_redis_server
from tests.support.processes import RedisServer, free_port

pytestmark = [pytest.mark.redis]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    yield from own_redis_server(tmp_path / "redis", extra_args=NO_EVICTION)


def envelope(job_id: str) -> Envelope:
    return Envelope(
        job_id=job_id,
        kind="partition",
        status="ok",
        result={"n": 1},
        engine_version="0.1.0",
        elapsed_ms=1.0,
    )


def event(event_id: str) -> LaunchOutcomeJob:
    return LaunchOutcomeJob(
        event_id=event_id, account="vsphere-a", outcome="failed", at=datetime.now(UTC)
    )


def fill_up(admin: redis.Redis) -> None:
    """maxmemory just above what the server uses, then written full."""
    used = int(admin.info("memory")["used_memory"])
    admin.config_set("maxmemory", used + 256 * 1024)
    for i in range(10_000):
        try:
            admin.set(f"filler:{i}", "x" * 1024)
        except redis.exceptions.OutOfMemoryError:
            return
    raise AssertionError("10 MB written under a 256 kB margin: maxmemory not enforced")


def test_an_out_of_memory_redis_is_store_unavailable_until_memory_is_freed(
    server: RedisServer,
) -> None:
    admin = server.client()
    client = make_redis(server.url, timeout=2.0, retries=0)
    publisher = StreamPublisher(client, Keys(), maxlen=100, dedup_ttl=60)
    failures = FailureStore(client, Keys(), retention_seconds=3600, stream_maxlen=100)
    fill_up(admin)

    with pytest.raises(StoreUnavailable, match="maxmemory"):
        publisher.publish(envelope("job-1"))
    with pytest.raises(StoreUnavailable, match="maxmemory"):
        failures.record(event("e1"), datetime.now(UTC))

    admin.config_set("maxmemory", 0)
    assert publisher.publish(envelope("job-1")) is not None
    assert failures.record(event("e1"), datetime.now(UTC)).recorded is True
    assert admin.xlen(Keys().results_stream("partition")) == 1


def test_a_master_turned_read_only_replica_is_store_unavailable_until_promoted_again(
    server: RedisServer,
) -> None:
    admin = server.client()
    client = make_redis(server.url, timeout=2.0, retries=0)
    publisher = StreamPublisher(client, Keys(), maxlen=100, dedup_ttl=60)
    failures = FailureStore(client, Keys(), retention_seconds=3600, stream_maxlen=100)
    # As at the old master's address after a failover: a replica (of a master that is
    # not even there), read-only.
    admin.replicaof("127.0.0.1", free_port())

    try:
        with pytest.raises(StoreUnavailable, match="read only replica"):
            publisher.publish(envelope("job-1"))
        with pytest.raises(StoreUnavailable, match="read only replica"):
            failures.record(event("e1"), datetime.now(UTC))
    finally:
        admin.replicaof("NO", "ONE")

    assert publisher.publish(envelope("job-1")) is not None
    assert failures.record(event("e1"), datetime.now(UTC)).recorded is True


def test_a_taken_item_is_recorded_or_put_back_even_out_of_memory(server: RedisServer) -> None:
    # Past maxmemory Redis refuses LMOVE and HSET (they may grow memory). A worker must
    # still take an item, record one its BLMOVE had taken, and put a dead connection's
    # taking list back: the transport's out-of-memory scripts (transport.py relies on
    # Redis letting a script that has written go on; this fails if Redis changes).
    admin = server.client()
    keys = Keys()
    taking, other = keys.taking("t0", "partition"), keys.taking("t1", "partition")
    items = [json.dumps({"n": n, "pad": "x" * 1000}).encode() for n in range(4)]
    admin.lpush("partition", *items)
    admin.lmove("partition", taking, "RIGHT", "LEFT")  # what BLMOVE does
    admin.lmove("partition", other, "RIGHT", "LEFT")
    fill_up(admin)
    admin.config_set("maxmemory", int(admin.info("memory")["used_memory"]) // 2)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        admin.hset("unacked", "tag-0", items[0])
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        admin.lmove("partition", taking, "RIGHT", "LEFT")
    pool = admin.connection_pool
    count = keys.delivery_count("tag-0")

    scripts = DirectScripts()
    try:
        settled = scripts.run(
            pool,
            _SETTLE_OUT_OF_MEMORY,
            [taking, "unacked_index", "unacked", count],
            [1.5, "tag-0", '""', '"partition"', 60],
        )
        moved = scripts.run(pool, _MOVE_OUT_OF_MEMORY, [keys.takers, "partition", taking], [2])
        first = scripts.run(pool, _FIRST, ["empty", "partition"], [])
        restored = scripts.run(pool, _RESTORE, [other, "partition", keys.takers], ["1"])
    finally:
        scripts.close()

    assert settled == [1, 0, 1]
    assert admin.hget("unacked", "tag-0") == b"[" + items[0] + b', "", "partition"]'
    assert admin.zscore("unacked_index", "tag-0") == 1.5
    assert moved == items[2]
    assert admin.lrange(taking, 0, -1) == [items[2]]
    assert admin.zscore(keys.takers, taking) == 2
    assert first == b"partition"
    assert restored == 1
    # Back at the consuming end, next to be taken.
    assert admin.lrange("partition", 0, -1) == [items[3], items[1]]
    assert admin.llen(other) == 0


def test_a_record_replayed_counts_once_and_is_undone_even_out_of_memory(
    server: RedisServer,
) -> None:
    # A take's record whose reply was lost is sent again (a retry) or undone (the worker
    # reconnected): either must leave the delivery counted once or not at all, and the
    # undo must put the message back even past maxmemory (it grows the queue).
    admin = server.client()
    keys = Keys()
    taking, count = keys.taking("t0", "partition"), keys.delivery_count("tag-0")
    item = json.dumps({"n": 0, "pad": "x" * 1000}).encode()
    admin.lpush(taking, item)
    fill_up(admin)
    admin.config_set("maxmemory", int(admin.info("memory")["used_memory"]) // 2)
    pool = admin.connection_pool
    settle_keys = [taking, "unacked_index", "unacked", count]
    settle_args = [1733600000.123456, "tag-0", '""', '"partition"', 60]
    undo_keys = ["unacked_index", "unacked", count, "partition"]

    scripts = DirectScripts()
    try:
        first = scripts.run(pool, _SETTLE_OUT_OF_MEMORY, settle_keys, settle_args)
        replayed = scripts.run(pool, _SETTLE_OUT_OF_MEMORY, settle_keys, settle_args)
        other_take = scripts.run(pool, _UNDO_RECORD, undo_keys, ["tag-0", 1733600000.5, item])
        undone = scripts.run(pool, _UNDO_RECORD, undo_keys, ["tag-0", settle_args[0], item])
        again = scripts.run(pool, _UNDO_RECORD, undo_keys, ["tag-0", settle_args[0], item])
    finally:
        scripts.close()

    assert first == [1, 0, 1]
    assert replayed == [1, 0, 1]  # its own record found by its stamp: not counted twice
    assert other_take == 0  # a record of another take (another stamp) is left alone
    assert (undone, again) == (1, 0)
    assert admin.lrange("partition", 0, -1) == [item]
    assert admin.hlen("unacked") == 0
    assert admin.zcard("unacked_index") == 0
    assert admin.get(count) is None


def test_a_transaction_redis_refuses_raises_the_refusal_and_runs_nothing(
    server: RedisServer,
) -> None:
    # The take's record is one MULTI/EXEC on the scripts' own connection; past
    # maxmemory its HSET is refused, and the transport falls back on seeing the refusal.
    admin = server.client()
    admin.rpush("taken", b"x")
    fill_up(admin)
    admin.config_set("maxmemory", int(admin.info("memory")["used_memory"]) // 2)
    scripts = DirectScripts()
    try:
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            scripts.transaction(
                admin.connection_pool,
                [("LTRIM", "taken", 1, -1), ("HSET", "unacked", "t", "x" * 1000)],
            )
        assert admin.llen("taken") == 1  # nothing ran
        # The connection is still in step: the next command gets its own reply.
        assert scripts.call(admin.connection_pool, "LLEN", "taken") == 1
    finally:
        scripts.close()
