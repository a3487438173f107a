"""Result events: once per job, capped streams, clear errors when Redis is away."""

from __future__ import annotations

import json

import fakeredis
import pytest
import redis

from apportion.contracts import Envelope
from apportion.errors import StoreUnavailable
from apportion.workers.redis.keys import Keys
from apportion.workers.results.publisher import MemoryPublisher, ResultRecord, StreamPublisher


def envelope(job_id: str, kind: str = "partition", status: str = "ok") -> Envelope:
    return Envelope(
        job_id=job_id,
        kind=kind,
        status=status,  # type: ignore[arg-type]
        result={"n": 1} if status == "ok" else None,
        engine_version="0.1.0",
        elapsed_ms=1.0,
    )


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


def publisher(client: redis.Redis, maxlen: int = 1000) -> StreamPublisher:
    return StreamPublisher(client, Keys(), maxlen=maxlen, dedup_ttl=60)


def test_a_result_event_carries_job_id_kind_status_and_the_envelope(
    client: fakeredis.FakeRedis,
) -> None:
    entry = publisher(client).publish(envelope("job-1"))

    assert entry is not None
    [(entry_id, fields)] = client.xrange("apportion:results:partition")
    assert entry_id.decode() == entry
    assert fields[b"job_id"] == b"job-1"
    assert fields[b"kind"] == b"partition"
    assert fields[b"status"] == b"ok"
    assert json.loads(fields[b"envelope"])["result"] == {"n": 1}


def test_publishing_the_same_job_twice_adds_one_entry(client: fakeredis.FakeRedis) -> None:
    pub = publisher(client)

    first = pub.publish(envelope("job-1"))
    second = pub.publish(envelope("job-1"))

    assert first is not None
    assert second is None
    assert client.xlen("apportion:results:partition") == 1


def test_the_same_job_id_in_two_kinds_is_two_jobs(client: fakeredis.FakeRedis) -> None:
    pub = publisher(client)
    pub.publish(envelope("job-1", "partition"))
    pub.publish(envelope("job-1", "auto_attach"))

    assert client.xlen("apportion:results:partition") == 1
    assert client.xlen("apportion:results:auto_attach") == 1


def test_the_idempotency_marker_expires_so_keys_stay_bounded(
    client: fakeredis.FakeRedis,
) -> None:
    publisher(client).publish(envelope("job-1"))

    ttl = client.ttl("apportion:published:partition:job-1")
    assert 0 < ttl <= 60


def test_streams_are_capped_near_maxlen(client: fakeredis.FakeRedis) -> None:
    pub = publisher(client, maxlen=10)
    for i in range(500):
        pub.publish(envelope(f"job-{i}"))

    # MAXLEN ~ trims in whole macro nodes: bounded, not exact.
    assert client.xlen("apportion:results:partition") < 200


def test_an_unreachable_redis_is_an_infrastructure_error() -> None:
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    pub = StreamPublisher.__new__(StreamPublisher)
    pub.__init__(dead, Keys(), maxlen=10, dedup_ttl=10)  # type: ignore[misc]

    with pytest.raises(StoreUnavailable):
        pub.publish(envelope("job-1"))


def test_an_envelope_without_job_id_cannot_be_published_idempotently(
    client: fakeredis.FakeRedis,
) -> None:
    with pytest.raises(ValueError, match="job_id"):
        publisher(client).publish(envelope(""))


def test_the_memory_publisher_keeps_the_same_once_per_job_rule() -> None:
    pub = MemoryPublisher()

    assert pub.publish(envelope("a")) == "1-0"
    assert pub.publish(envelope("a")) is None
    assert pub.publish(envelope("b")) == "2-0"
    assert [e.job_id for e in pub.envelopes()] == ["a", "b"]


def test_publishing_goes_on_after_the_server_forgets_its_scripts(
    client: fakeredis.FakeRedis,
) -> None:
    # A Redis restart or SCRIPT FLUSH empties the script cache the publisher's EVALSHA
    # relies on: the script is loaded again and the event still goes out once.
    pub = publisher(client)
    pub.publish(envelope("job-1"))
    client.script_flush()

    assert pub.publish(envelope("job-2")) is not None
    assert pub.publish(envelope("job-2")) is None
    assert client.xlen("apportion:results:partition") == 2


class Interrupted(BaseException):
    """Stands in for Celery's soft time limit, raised between a command and its reply."""


def test_a_reply_left_unread_by_an_interruption_is_never_taken_for_the_next_one(
    client: fakeredis.FakeRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    pub = publisher(client)
    pub.publish(envelope("job-0"))  # connects
    conn = pub._connection
    assert conn is not None
    real_read = conn.read_response
    calls = iter([True])

    def read_once_interrupted(*args: object, **kwargs: object) -> object:
        if next(calls, False):
            raise Interrupted  # job-1's reply (its entry id) stays on the wire
        return real_read(*args, **kwargs)

    monkeypatch.setattr(conn, "read_response", read_once_interrupted)
    with pytest.raises(Interrupted):
        pub.publish(envelope("job-1"))

    entry = pub.publish(envelope("job-2"))

    entries = client.xrange("apportion:results:partition")
    assert [fields[b"job_id"] for _, fields in entries] == [b"job-0", b"job-1", b"job-2"]
    assert entry == entries[2][0].decode()  # job-2's own id, not job-1's stale reply


def test_a_forked_child_publishes_on_a_connection_of_its_own(
    client: fakeredis.FakeRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    pub = publisher(client)
    pub.publish(envelope("job-1"))
    parents = pub._connection

    monkeypatch.setattr(
        "apportion.workers.results.publisher.os.getpid", lambda: -1
    )  # as after fork
    pub.publish(envelope("job-2"))

    assert pub._connection is not parents
    assert client.xlen("apportion:results:partition") == 2


def test_a_result_record_is_stored_and_announced_with_the_event_and_only_then(
    client: fakeredis.FakeRedis,
) -> None:
    pub = publisher(client)
    record = ResultRecord(key="celery-task-meta-t1", value=b'{"status": "SUCCESS"}', ttl=300)
    announced = client.pubsub()
    announced.subscribe("celery-task-meta-t1")
    announced.get_message(timeout=1)  # the subscription's confirmation

    first = pub.publish_once(envelope("job-1"), "fp", record=record)
    again = pub.publish_once(
        envelope("job-1"),
        "fp",
        record=ResultRecord(key="celery-task-meta-t2", value=b"{}", ttl=300),
    )

    assert first.new
    assert first.recorded
    assert client.get("celery-task-meta-t1") == b'{"status": "SUCCESS"}'
    assert 290 < client.ttl("celery-task-meta-t1") <= 300
    message = announced.get_message(timeout=1)
    assert message is not None
    assert message["data"] == b'{"status": "SUCCESS"}'
    # A job_id answered before: nothing stored here, the task stores its own answer.
    assert not again.new
    assert not again.recorded
    assert client.get("celery-task-meta-t2") is None


def test_the_memory_publisher_never_claims_a_record() -> None:
    record = ResultRecord(key="k", value=b"{}", ttl=1)

    done = MemoryPublisher().publish_once(envelope("job-1"), "fp", record=record)

    assert done.new
    assert not done.recorded


def big_envelope(job_id: str) -> Envelope:
    return Envelope(
        job_id=job_id,
        kind="launch_select",
        status="ok",
        result={"candidates": ["x" * 100] * 1000},  # ~100 KB of JSON
        engine_version="0.1.0",
        elapsed_ms=1.0,
    )


def test_a_big_envelope_is_kept_once_in_its_record_which_the_entry_names(
    client: fakeredis.FakeRedis,
) -> None:
    big = big_envelope("job-1")
    text = json.dumps(big.as_dict()).encode()
    value = b'{"status": "SUCCESS", "result": ' + text + b"}"
    pub = StreamPublisher(client, Keys(), maxlen=1000, dedup_ttl=60, max_age_seconds=7200)

    done = pub.publish_once(
        big, "fp", text, record=ResultRecord(key="celery-task-meta-t1", value=value, ttl=300)
    )

    assert done.recorded
    [(entry_id, fields)] = client.xrange("apportion:results:launch_select")
    assert b"envelope" not in fields
    assert fields[b"envelope_key"] == b"celery-task-meta-t1"
    assert fields[b"status"] == b"ok"
    assert client.get("celery-task-meta-t1") == value
    assert 7190 < client.ttl("celery-task-meta-t1") <= 7200  # as long as the entry lives
    # A redelivered job is answered from the record the entry names.
    assert pub.published_envelope("launch_select", entry_id.decode()) == big.as_dict()


def test_a_small_envelope_or_one_without_a_record_stays_on_the_stream(
    client: fakeredis.FakeRedis,
) -> None:
    big = big_envelope("job-2")
    small = envelope("job-3")
    pub = publisher(client)
    record = ResultRecord(key="celery-task-meta-t3", value=b'{"status": "SUCCESS"}', ttl=300)

    pub.publish_once(big, "fp", json.dumps(big.as_dict()).encode())
    pub.publish_once(small, "fp", json.dumps(small.as_dict()).encode(), record=record)

    entries = {f[b"job_id"]: f for _, f in client.xrange("apportion:results:launch_select")}
    assert json.loads(entries[b"job-2"][b"envelope"]) == big.as_dict()
    [(_, small_fields)] = client.xrange("apportion:results:partition")
    assert json.loads(small_fields[b"envelope"]) == small.as_dict()
    assert 290 < client.ttl("celery-task-meta-t3") <= 300
