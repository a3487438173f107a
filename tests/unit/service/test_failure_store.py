"""The failure-history store: once per event id, a sliding window, no unbounded keys."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import fakeredis
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.contracts.events import LaunchOutcomeJob
from apportion.workers.history.failure_store import FailureStore, MemoryFailureStore, Recorded
from apportion.workers.redis.keys import Keys

NOW = datetime(2026, 11, 21, 22, 0, tzinfo=UTC)


def event(
    event_id: str, account: str = "vsphere-a", *, hours_ago: float = 0, outcome: str = "failed"
) -> LaunchOutcomeJob:
    return LaunchOutcomeJob(
        event_id=event_id,
        account=account,
        outcome=outcome,  # type: ignore[arg-type]
        at=NOW - timedelta(hours=hours_ago),
        reason="quota exceeded",
    )


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


@pytest.fixture
def store(client: fakeredis.FakeRedis) -> FailureStore:
    return FailureStore(client, Keys(), retention_seconds=24 * 3600, stream_maxlen=1000)


def test_a_failure_is_counted_and_appended_to_the_launch_failures_stream(
    store: FailureStore, client: fakeredis.FakeRedis
) -> None:
    outcome = store.record(event("e1"), NOW)

    assert outcome.recorded
    assert outcome.failure
    assert store.counts(["vsphere-a", "ec2"], 6, NOW) == {"vsphere-a": 1, "ec2": 0}
    [(_, fields)] = client.xrange("apportion:launch-failures")
    assert fields[b"event_id"] == b"e1"
    assert fields[b"account"] == b"vsphere-a"
    assert fields[b"reason"] == b"quota exceeded"


def test_a_repeated_event_id_changes_nothing(
    store: FailureStore, client: fakeredis.FakeRedis
) -> None:
    store.record(event("e1"), NOW)
    again = store.record(event("e1"), NOW)

    assert not again.recorded
    assert store.counts(["vsphere-a"], 6, NOW) == {"vsphere-a": 1}
    assert client.xlen("apportion:launch-failures") == 1


def test_successes_are_remembered_for_idempotency_but_not_counted(
    store: FailureStore, client: fakeredis.FakeRedis
) -> None:
    outcome = store.record(event("ok-1", outcome="succeeded"), NOW)

    assert outcome.recorded
    assert not outcome.failure
    assert store.counts(["vsphere-a"], 6, NOW) == {"vsphere-a": 0}
    assert not client.exists("apportion:launch-failures")


def test_only_failures_inside_the_window_count(store: FailureStore) -> None:
    for i, hours in enumerate([0.5, 2, 5.9, 6.1, 20]):
        store.record(event(f"e{i}", hours_ago=hours), NOW)

    assert store.counts(["vsphere-a"], 6, NOW) == {"vsphere-a": 3}
    assert store.counts(["vsphere-a"], 1, NOW) == {"vsphere-a": 1}
    assert store.counts(["vsphere-a"], 24, NOW) == {"vsphere-a": 5}


def test_entries_older_than_retention_are_dropped_and_keys_expire(
    store: FailureStore, client: fakeredis.FakeRedis
) -> None:
    store.record(event("old", hours_ago=30), NOW)
    store.record(event("new", hours_ago=1), NOW)

    members = client.zrange("apportion:failures:vsphere-a", 0, -1)
    assert members == [b"new"]
    assert 0 < client.ttl("apportion:failures:vsphere-a") <= 24 * 3600
    assert 0 < client.ttl("apportion:outcome:new") <= 24 * 3600


def test_counts_are_monotone_in_the_number_of_failures(store: FailureStore) -> None:
    seen = []
    for i in range(6):
        store.record(event(f"e{i}", hours_ago=i * 0.5), NOW)
        seen.append(store.counts(["vsphere-a"], 6, NOW)["vsphere-a"])

    assert seen == [1, 2, 3, 4, 5, 6]


def test_an_account_keeps_only_its_newest_failures_up_to_the_cap(
    client: fakeredis.FakeRedis,
) -> None:
    store = FailureStore(
        client, Keys(), retention_seconds=24 * 3600, stream_maxlen=1000, max_per_account=10
    )
    for i in range(30):
        store.record(event(f"e{i}", hours_ago=(30 - i) / 10), NOW)

    kept = [m.decode() for m in client.zrange("apportion:failures:vsphere-a", 0, -1)]
    assert kept == [f"e{i}" for i in range(20, 30)]
    assert store.counts(["vsphere-a"], 24, NOW) == {"vsphere-a": 10}


def test_a_failure_older_than_the_retention_is_not_recorded_and_says_so(
    store: FailureStore, client: fakeredis.FakeRedis
) -> None:
    outcome = store.record(event("old", hours_ago=25), NOW)

    assert not outcome.recorded
    assert outcome.outside_retention
    assert store.counts(["vsphere-a"], 24, NOW) == {"vsphere-a": 0}
    assert not client.exists("apportion:failures:vsphere-a")


@pytest.mark.parametrize("kind", ["redis", "memory"])
def test_a_send_of_the_same_content_gets_the_first_answer_and_other_content_is_a_duplicate(
    kind: str, client: fakeredis.FakeRedis
) -> None:
    store: FailureStore | MemoryFailureStore = (
        FailureStore(client, Keys(), retention_seconds=24 * 3600, stream_maxlen=1000)
        if kind == "redis"
        else MemoryFailureStore()
    )
    first = store.record(event("e1"), NOW, "digest-a")
    same = store.record(event("e1"), NOW, "digest-a")
    other = store.record(event("e1", account="ec2"), NOW, "digest-b")
    unsigned = store.record(event("e1"), NOW)

    assert first == same == Recorded(recorded=True, failure=True)
    assert other == Recorded(recorded=False, failure=True, duplicate=True)
    assert unsigned == Recorded(recorded=False, failure=True)
    assert store.counts(["vsphere-a", "ec2"], 6, NOW) == {"vsphere-a": 1, "ec2": 0}


def test_the_same_content_outside_the_retention_is_answered_so_every_time(
    store: FailureStore,
) -> None:
    first = store.record(event("old", hours_ago=25), NOW, "d")
    again = store.record(event("old", hours_ago=25), NOW, "d")

    assert first == again == Recorded(recorded=False, failure=True, outside_retention=True)


def test_the_event_id_marker_lives_as_long_as_the_published_marker_at_least(
    client: fakeredis.FakeRedis,
) -> None:
    store = FailureStore(
        client, Keys(), retention_seconds=3600, stream_maxlen=1000, dedup_ttl=86_400
    )
    store.record(event("e1"), NOW, "d")

    assert client.ttl(Keys().failure_event_marker("e1")) > 3600


@given(
    sends=st.lists(
        st.tuples(st.sampled_from(["vsphere-a", "ec2", "gce"]), st.sampled_from([0, 30])),
        min_size=1,
        max_size=8,
    )
)
@settings(max_examples=60, deadline=None)
def test_every_send_of_an_event_id_is_answered_as_the_history_holds_it(
    sends: list[tuple[str, float]],
) -> None:
    """Whatever the order of sends of one event id: the first content is the one the
    history holds, every send of it gets the first answer, every other is a duplicate."""
    store = FailureStore(
        fakeredis.FakeRedis(), Keys(), retention_seconds=24 * 3600, stream_maxlen=1000
    )
    answers = [
        (
            account,
            hours,
            store.record(event("e1", account, hours_ago=hours), NOW, f"{account}/{hours}"),
        )
        for account, hours in sends
    ]

    first_account, first_hours, first = answers[0]
    for account, hours, answer in answers:
        if (account, hours) == (first_account, first_hours):
            assert answer == first
        else:
            assert answer == Recorded(recorded=False, failure=True, duplicate=True)
    held = {a: n for a, n in store.counts(["vsphere-a", "ec2", "gce"], 48, NOW).items() if n}
    assert held == ({} if first.outside_retention else {first_account: 1})
    assert first.recorded is not first.outside_retention
