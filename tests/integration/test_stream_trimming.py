"""Trimming respects subscribers: a real Redis, the worker's own publisher class.

APPORTION_STREAM_MAXLEN caps a stream, but never removes what a consumer group has not
read; the age cap (APPORTION_STREAM_MAX_AGE) is the last resort, and what it removes
unread is counted per group, exported, and makes ``apportion health`` fail naming it
(reported without failing by a check narrowed with ``--queue``, a worker's container
check).
"""

from __future__ import annotations

import pytest
import redis

from apportion.cli.health import render
from apportion.config.settings import Settings
from apportion.contracts import Envelope
from apportion.workers.health import check
from apportion.workers.metrics.redis_state import RedisStateCollector
from apportion.workers.redis.keys import Keys
from apportion.workers.results.answers import fingerprint
from apportion.workers.results.publisher import StreamPublisher
from apportion.workers.results.subscriber import StreamSubscriber

pytestmark = [pytest.mark.redis]

KEYS = Keys()
STREAM = KEYS.results_stream("partition")


def publisher(client: redis.Redis, *, max_age: int = 86_400) -> StreamPublisher:
    return StreamPublisher(client, KEYS, maxlen=1000, dedup_ttl=3600, max_age_seconds=max_age)


def publish(pub: StreamPublisher, first: int, n: int) -> None:
    for i in range(first, first + n):
        envelope = Envelope.from_dict(
            {"job_id": f"job-{i}", "kind": "partition", "status": "ok", "result": {"i": i}}
        )
        assert pub.publish_once(envelope, fingerprint({"i": i})).new


def read_all(sub: StreamSubscriber) -> list[str]:
    seen: list[str] = []
    while events := sub.read(count=500, block_ms=None):
        for event in events:
            sub.ack(event)
            seen.append(event.job_id)
    return seen


def test_a_group_created_before_3000_jobs_with_maxlen_1000_gets_all_of_them(
    redis_url: str,
) -> None:
    client = redis.Redis.from_url(redis_url)
    sub = StreamSubscriber(client, [STREAM], group="billing", consumer="b1", start="$")
    sub.ensure_groups()
    pub = publisher(client)

    publish(pub, 0, 3000)
    delivered = read_all(sub)

    assert delivered == [f"job-{i}" for i in range(3000)]
    # Every group has read everything: the next publications trim back to the cap.
    publish(pub, 3000, 200)
    assert 1000 <= client.xlen(STREAM) < 1200


def test_without_groups_the_stream_is_capped_at_maxlen(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)

    publish(publisher(client), 0, 3000)

    assert 1000 <= client.xlen(STREAM) < 1200


def test_what_the_age_cap_removes_unread_fails_health_naming_the_group(
    redis_url: str,
) -> None:
    client = redis.Redis.from_url(redis_url)
    StreamSubscriber(client, [STREAM], group="billing", consumer="b1", start="$").ensure_groups()
    publish(publisher(client), 0, 250)

    # An age cap of 0 s removes what is older than now at the next publication (whole
    # stream nodes, 100 entries each: MINID ~).
    publish(publisher(client, max_age=0), 250, 1)

    lost = int(client.hget(KEYS.trimmed_unread(STREAM), "billing") or 0)
    assert lost == 251 - client.xlen(STREAM) >= 200
    settings = Settings(redis_url=redis_url)
    health = check(settings, timeout=0.5)
    assert f"{STREAM} group billing: {lost} entries were trimmed" in " ".join(health.problems)
    # A worker's container check (--queue) reports it without failing for it.
    narrowed = check(settings, queues=["partition"], timeout=0.5)
    assert narrowed.as_dict()["streams"][STREAM]["trimmed_unread"] == {"billing": lost}
    assert not any("trimmed" in p for p in narrowed.problems)
    assert f"  group billing: {lost} entries trimmed before it read them" in render(
        narrowed.as_dict()
    )
    families = {f.name: f for f in RedisStateCollector(Settings(redis_url=redis_url)).collect()}
    [sample] = families["apportion_stream_trimmed_unread"].samples
    assert sample.labels == {"stream": STREAM, "group": "billing"}
    assert sample.value == lost
