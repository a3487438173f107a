"""The dead-letter stream: bury with a reason, list newest first, requeue one."""

from __future__ import annotations

import re
from pathlib import Path

import fakeredis
import pytest

from apportion.workers.broker import dead_letters as dead_letters_module
from apportion.workers.broker.dead_letters import (
    REASONS,
    CannotRequeue,
    DeadLetterPolicy,
    DeadLetters,
    describe,
)
from apportion.workers.redis.keys import Keys

KEYS = Keys()


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


def store(client: fakeredis.FakeRedis, copy_bytes: int = 1024 * 1024) -> DeadLetters:
    return DeadLetters(client, KEYS, DeadLetterPolicy(maxlen=1000, copy_bytes=copy_bytes))


def test_burying_forgets_the_delivery_and_keeps_the_item_with_its_reason(
    client: fakeredis.FakeRedis,
) -> None:
    client.hset("unacked", "tag-1", "[...]")
    client.zadd("unacked_index", {"tag-1": 1.0})
    client.set(KEYS.delivery_count("tag-1"), 2)

    store(client).bury(
        b'{"not": "runnable"}',
        queue="partition",
        reason="unknown_task",
        detail="no task named x",
        tag="tag-1",
        task="x",
        task_id="t-1",
        unacked=("unacked", "unacked_index"),
    )

    assert not client.hexists("unacked", "tag-1")
    assert client.zscore("unacked_index", "tag-1") is None
    assert not client.exists(KEYS.delivery_count("tag-1"))
    [letter] = store(client).newest()
    assert letter.reason == "unknown_task"
    assert letter.message == b'{"not": "runnable"}'
    assert letter.fields["task_id"] == "t-1"
    assert "unknown_task" in describe(letter)


def test_the_newest_come_first_and_can_be_filtered_by_reason(
    client: fakeredis.FakeRedis,
) -> None:
    dead = store(client)
    for i in range(150):
        dead.bury(
            b"x", queue="partition", reason="not_json" if i % 3 else "quarantined", detail=str(i)
        )

    newest = dead.newest(count=5)
    quarantined = dead.newest(count=100, reason="quarantined")

    assert [int(letter.fields["detail"]) for letter in newest] == [149, 148, 147, 146, 145]
    assert len(quarantined) == 50
    assert all(letter.reason == "quarantined" for letter in quarantined)


def test_requeueing_pushes_the_item_back_resets_its_count_and_removes_the_entry(
    client: fakeredis.FakeRedis,
) -> None:
    dead = store(client)
    client.set(KEYS.delivery_count("tag-9"), 3)
    entry = dead.bury(
        b'{"job": 1}', queue="partition", reason="quarantined", detail="", tag="tag-9"
    )

    dead.requeue(entry)

    assert client.lrange("partition", 0, -1) == [b'{"job": 1}']
    assert not client.exists(KEYS.delivery_count("tag-9"))
    assert dead.newest() == []


def test_a_truncated_copy_cannot_be_requeued(client: fakeredis.FakeRedis) -> None:
    dead = store(client, copy_bytes=1024)
    entry = dead.bury(b"y" * 5000, queue="partition", reason="too_large", detail="")

    with pytest.raises(CannotRequeue, match="APPORTION_DEAD_LETTER_COPY_BYTES"):
        dead.requeue(entry)
    assert dead.get(entry) is not None
    assert client.llen("partition") == 0


def test_an_unknown_entry_cannot_be_requeued(client: fakeredis.FakeRedis) -> None:
    with pytest.raises(CannotRequeue, match="no dead letter"):
        store(client).requeue("1-1")


def test_an_entry_requeued_twice_at_once_is_pushed_once(
    client: fakeredis.FakeRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = store(client)
    dead.bury(b'{"a": 1}', queue="partition", reason="quarantined", detail="x", tag="tag-2")
    [letter] = dead.newest()
    # The second operator read the entry just before the first one requeued it.
    second = store(client)
    stale = second.get(letter.entry_id)
    monkeypatch.setattr(second, "get", lambda _entry_id: stale)

    store(client).requeue(letter.entry_id)
    with pytest.raises(CannotRequeue, match="someone else"):
        second.requeue(letter.entry_id)

    assert client.llen("partition") == 1


@pytest.mark.parametrize("entry_id", ["latest", "12-x", "", "1-2-3"])
def test_a_malformed_entry_id_is_a_clear_refusal_not_a_redis_error(
    client: fakeredis.FakeRedis, entry_id: str
) -> None:
    with pytest.raises(CannotRequeue, match="not a stream entry id"):
        store(client).requeue(entry_id)


def _reasons_the_gate_buries_for() -> set[str]:
    """Every reason literal in the gate and in the transport's pop script and quarantine."""
    broker = Path(dead_letters_module.__file__).parent
    gate = (broker / "gate.py").read_text()
    transport = (broker / "transport.py").read_text()
    return (
        set(re.findall(r'_Refused\(\s*"([a-z_]+)"', gate))
        | set(re.findall(r'Bury\(\s*"([a-z_]+)"', gate))
        | set(re.findall(r"bury\(queue, item, '([a-z_]+)'", transport))
        | set(re.findall(r'reason="([a-z_]+)"', transport))
    )


def test_every_reason_the_gate_buries_for_is_classed_retriable_or_never_runnable() -> None:
    found = _reasons_the_gate_buries_for()

    assert len(found) >= 10  # the patterns above still find the gate's reasons
    assert found == set(REASONS)


@pytest.mark.parametrize("reason", sorted(r for r, c in REASONS.items() if not c.retriable))
def test_an_item_that_can_never_run_is_not_requeued_and_the_refusal_says_why(
    client: fakeredis.FakeRedis, reason: str
) -> None:
    dead = store(client)
    entry = dead.bury(b"\x00not json", queue="partition", reason=reason, detail="")

    with pytest.raises(CannotRequeue, match=f"dead-lettered as {reason} .*never run"):
        dead.requeue(entry)

    assert client.llen("partition") == 0
    assert dead.get(entry) is not None


@pytest.mark.parametrize("reason", sorted(r for r, c in REASONS.items() if c.retriable))
def test_an_item_that_may_run_after_a_change_is_requeued(
    client: fakeredis.FakeRedis, reason: str
) -> None:
    dead = store(client)
    entry = dead.bury(b'{"job": 1}', queue="partition", reason=reason, detail="")

    dead.requeue(entry)

    assert client.lrange("partition", 0, -1) == [b'{"job": 1}']
