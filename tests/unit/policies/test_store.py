"""The policy store against a real redis-server: versions, history, diff, validation,
concurrent saves, trimming."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from apportion.errors import Rejected, StoreUnavailable
from apportion.workers.policies.store import DEFAULT_POOL, PolicyStore, PolicyVersion, diff
from apportion.workers.redis.keys import Keys

pytestmark = pytest.mark.redis

EQUAL: list[dict[str, Any]] = [{"module": "equal"}]
PENALTY: list[dict[str, Any]] = [
    {"module": "equal"},
    {"module": "failure_penalty", "percent": 5, "window_hours": 6},
]


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


@pytest.fixture
def store(client: redis.Redis) -> PolicyStore:
    return PolicyStore(client)


def test_each_save_is_the_next_version_with_its_author_comment_and_time(
    store: PolicyStore,
) -> None:
    before = time.time()
    first = store.save("gpu", EQUAL, author="alice@ops", comment="start simple")
    second = store.save("gpu", PENALTY, author="bob@ops")

    assert (first.version, first.author, first.comment) == (1, "alice@ops", "start simple")
    assert (second.version, second.author, second.comment) == (2, "bob@ops", "")
    assert before <= first.saved_at <= second.saved_at <= time.time()
    assert store.current("gpu") == second
    assert store.version("gpu", 1) == first
    assert store.version("gpu", 3) is None
    assert second.policy == PENALTY


def test_history_lists_every_version_newest_first(store: PolicyStore) -> None:
    for n in range(1, 4):
        store.save("gpu", [{"module": "equal"}, {"module": "cost", "amount": n}], author="a")

    history = store.history("gpu")

    assert [v.version for v in history] == [3, 2, 1]
    assert [v.policy[1]["amount"] for v in history] == [3, 2, 1]
    assert [v.version for v in store.history("gpu", limit=2)] == [3, 2]
    assert store.history("nothing-here") == []


def test_pools_lists_every_pool_with_a_policy_default_included(store: PolicyStore) -> None:
    assert store.pools() == []
    store.save("zeta", EQUAL, author="a")
    store.seed_default(PENALTY)
    store.save("alpha:east", EQUAL, author="a")

    assert store.pools() == ["alpha:east", "default", "zeta"]


def test_a_pool_without_a_policy_gets_the_defaults(store: PolicyStore) -> None:
    assert store.effective("gpu") is None
    default = store.save(DEFAULT_POOL, EQUAL, author="a")
    assert store.effective("gpu") == default
    assert store.effective(None) == default
    own = store.save("gpu", PENALTY, author="a")
    assert store.effective("gpu") == own
    assert store.effective("other") == default


def test_seeding_writes_version_one_of_the_default_only_when_it_has_none(
    store: PolicyStore,
) -> None:
    seeded = store.seed_default(PENALTY)
    assert seeded is not None
    assert (seeded.pool, seeded.version, seeded.policy) == ("default", 1, PENALTY)

    assert store.seed_default(EQUAL) is None
    assert store.current(DEFAULT_POOL) == seeded


def test_seeding_concurrently_writes_one_version(client: redis.Redis) -> None:
    results: list[PolicyVersion | None] = []

    def seed() -> None:
        results.append(PolicyStore(client).seed_default(EQUAL))

    threads = [threading.Thread(target=seed) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sum(r is not None for r in results) == 1
    assert [v.version for v in PolicyStore(client).history(DEFAULT_POOL)] == [1]


def test_concurrent_saves_get_distinct_versions(redis_url: str) -> None:
    def save_many(who: str) -> None:
        client = redis.Redis.from_url(redis_url)
        store = PolicyStore(client)
        for i in range(25):
            store.save("gpu", [{"module": "equal"}, {"module": "cost", "amount": i}], author=who)
        client.close()

    threads = [threading.Thread(target=save_many, args=(f"admin{n}",)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    history = PolicyStore(redis.Redis.from_url(redis_url)).history("gpu")
    assert [v.version for v in history] == list(range(100, 0, -1))
    assert {v.author for v in history} == {"admin0", "admin1", "admin2", "admin3"}


def test_only_the_newest_versions_are_kept_and_numbers_are_never_reused(
    client: redis.Redis,
) -> None:
    store = PolicyStore(client, max_versions=3)
    for i in range(5):
        store.save("gpu", [{"module": "equal"}, {"module": "cost", "amount": i}], author="a")

    assert [v.version for v in store.history("gpu")] == [5, 4, 3]
    assert store.version("gpu", 2) is None
    assert client.hlen(Keys().policy("gpu")) == 3 + 3  # v:3..5, current, head, low
    assert store.save("gpu", EQUAL, author="a").version == 6


def test_lowering_the_bound_trims_on_the_next_save(client: redis.Redis) -> None:
    for _ in range(6):
        PolicyStore(client).save("gpu", EQUAL, author="a")
    PolicyStore(client, max_versions=2).save("gpu", PENALTY, author="a")

    assert [v.version for v in PolicyStore(client).history("gpu")] == [7, 6]


@pytest.mark.parametrize(
    ("policy", "path", "code"),
    [
        ([{"module": "weights"}], "policy[0].module", "invalid_job"),
        ([{"module": "equal"}, {"module": "failure_penalty", "percent": 500}], "policy[1].percent",
         "invalid_job"),
        ([{"module": "equal"}, {"module": "nope"}], "policy[1].module", "invalid_job"),
        ([{"module": "equal"}, {"module": "cost", "mdoe": "strict"}], "policy[1].mdoe",
         "unknown_field"),
        ([], "policy", "invalid_job"),
        ({"module": "equal"}, "policy", "invalid_job"),
        ([{"module": "equal"}] * 33, "policy", "too_large"),
        ([{"module": "equal"}, {"module": "expression", "expression": "$.priority +"}],
         "policy[1].expression", "bad_expression"),
        ([{"module": "equal"}, {"module": "expression", "expression": "1" * 5000}],
         "policy[1].expression", "bad_expression"),
    ],
)  # fmt: skip
def test_an_invalid_policy_is_rejected_naming_the_field_and_nothing_is_written(
    store: PolicyStore, policy: Any, path: str, code: str
) -> None:
    with pytest.raises(Rejected) as caught:
        store.save("gpu", policy, author="a")

    assert caught.value.problems[0].path == path
    assert caught.value.code == code
    assert path in caught.value.message
    assert store.current("gpu") is None
    assert store.pools() == []


def test_a_policy_over_the_size_limit_is_rejected(client: redis.Redis) -> None:
    store = PolicyStore(client, max_bytes=200)
    long = [{"module": "equal"}, {"module": "expression", "expression": "1", "name": "x" * 120},
            {"module": "expression", "expression": "1", "name": "y" * 120}]  # fmt: skip

    with pytest.raises(Rejected) as caught:
        store.save("gpu", long, author="a")

    assert caught.value.code == "too_large"
    assert caught.value.problems[0].path == "policy"


@pytest.mark.parametrize(
    ("pool", "author", "comment", "path"),
    [
        ("", "a", "", "pool"),
        ("has space", "a", "", "pool"),
        ("-leading", "a", "", "pool"),
        ("x" * 129, "a", "", "pool"),
        ("gpu", "", "", "author"),
        ("gpu", "a", "two\nlines", "comment"),
        ("gpu", "a", "c" * 1025, "comment"),
    ],
)
def test_bad_pool_names_authors_and_comments_are_rejected_naming_them(
    store: PolicyStore, pool: str, author: str, comment: str, path: str
) -> None:
    with pytest.raises(Rejected) as caught:
        store.save(pool, EQUAL, author=author, comment=comment)

    assert caught.value.problems[0].path == path


def test_a_policy_saved_is_the_policy_read_key_order_and_numbers_included(
    store: PolicyStore,
) -> None:
    policy = [
        {"module": "least_used", "weighted": True},
        {"module": "priority", "strength": 0.25, "mode": "probabilistic"},
        {"module": "expression", "name": "nights", "expression": "1 + $.priority / 10"},
    ]
    store.save("gpu", policy, author="ünïcode@host", comment="über")

    got = store.current("gpu")
    assert got is not None
    assert got.policy == policy
    assert [list(m) for m in got.policy] == [list(m) for m in policy]
    assert (got.author, got.comment) == ("ünïcode@host", "über")


def test_diff_shows_the_changed_lines_of_the_yaml_forms(store: PolicyStore) -> None:
    a = store.save("gpu", PENALTY, author="a")
    b = store.save(
        "gpu",
        [{"module": "equal"}, {"module": "failure_penalty", "percent": 10, "window_hours": 6}],
        author="a",
    )

    assert diff(a, b) == (
        "--- gpu v1\n"
        "+++ gpu v2\n"
        "@@ -1,4 +1,4 @@\n"
        " - module: equal\n"
        " - module: failure_penalty\n"
        "-  percent: 5\n"
        "+  percent: 10\n"
        "   window_hours: 6\n"
    )
    assert diff(a, a) == ""


def test_an_unreachable_redis_raises_store_unavailable() -> None:
    client = redis.Redis(
        host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0)
    )
    store = PolicyStore(client)

    with pytest.raises(StoreUnavailable):
        store.effective("gpu")
    with pytest.raises(StoreUnavailable):
        store.save("gpu", EQUAL, author="a")


def test_a_record_that_is_not_the_stores_raises_store_unavailable_naming_the_pool() -> None:
    client = fakeredis.FakeRedis()
    client.hset(Keys().policy("gpu"), "current", b'{"version": "one"}')

    with pytest.raises(StoreUnavailable, match="'gpu'"):
        PolicyStore(client).effective("gpu")


def test_keys_follow_the_configured_prefix() -> None:
    client = fakeredis.FakeRedis()
    PolicyStore(client, Keys("tenant-a")).save("gpu", EQUAL, author="a")

    assert sorted(client.keys()) == [b"tenant-a:policy-pools", b"tenant-a:policy:gpu"]


def test_a_policy_nested_without_end_is_rejected_naming_where_not_crashing() -> None:
    deep: Any = "x"
    for _ in range(5000):
        deep = [deep]
    store = PolicyStore(fakeredis.FakeRedis())

    with pytest.raises(Rejected) as caught:
        store.save("gpu", [{"module": "equal", "deep": deep}], author="a")

    assert caught.value.code == "too_deep"
    assert caught.value.problems[0].path.startswith("policy[0].deep")
