"""A subscriber that crashes resumes without missing or repeating entries."""

from __future__ import annotations

import fakeredis

from apportion.workers.results.subscriber import StreamSubscriber

STREAM = "apportion:results:partition"


def fill(client: fakeredis.FakeRedis, n: int) -> None:
    for i in range(n):
        client.xadd(
            STREAM, {"job_id": f"j{i}", "kind": "partition", "status": "ok", "envelope": "{}"}
        )


def test_a_restarted_consumer_first_rereads_what_it_had_not_acknowledged() -> None:
    client = fakeredis.FakeRedis()
    fill(client, 5)
    sub = StreamSubscriber(client, [STREAM], consumer="c1")
    sub.ensure_groups()
    first = sub.read(count=3, block_ms=None)
    sub.ack(first[0])  # processed j0, then crashed before acking j1 and j2

    again = StreamSubscriber(client, [STREAM], consumer="c1")
    again.ensure_groups()
    seen = [e.job_id for e in again.read(count=10, block_ms=None)]
    for e in again.read(count=10, block_ms=None):
        seen.append(e.job_id)

    assert [e.job_id for e in first] == ["j0", "j1", "j2"]
    assert seen[:2] == ["j1", "j2"]
    assert "j0" not in seen


def test_entries_abandoned_by_a_dead_consumer_are_claimed_by_another() -> None:
    client = fakeredis.FakeRedis()
    fill(client, 2)
    dead = StreamSubscriber(client, [STREAM], consumer="dead")
    dead.ensure_groups()
    dead.read(count=2, block_ms=None)  # never acked

    other = StreamSubscriber(client, [STREAM], consumer="other", claim_idle_ms=0)
    other.ensure_groups()
    claimed = other.read(count=10, block_ms=None)

    assert [e.job_id for e in claimed] == ["j0", "j1"]


def test_an_entry_naming_the_record_of_its_envelope_is_read_with_that_envelope() -> None:
    client = fakeredis.FakeRedis()
    client.set("celery-task-meta-t1", '{"status": "SUCCESS", "result": {"job_id": "big"}}')
    client.xadd(
        STREAM,
        {
            "job_id": "big",
            "kind": "partition",
            "status": "ok",
            "envelope_key": "celery-task-meta-t1",
        },
    )
    client.xadd(
        STREAM, {"job_id": "gone", "kind": "partition", "status": "ok", "envelope_key": "x"}
    )
    fill(client, 1)
    sub = StreamSubscriber(client, [STREAM], consumer="c1")
    sub.ensure_groups()

    events = sub.read(count=10, block_ms=None)

    assert [e.envelope() for e in events] == [{"job_id": "big"}, {}, {}]
