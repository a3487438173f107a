"""Nothing a worker takes off a queue is ever lost, not even when the reply to its idle
blocking take dies with its connection (a failover, or a NAT entry that expired without
a reset): the take moved the job into a list on the server, so it comes back.

A real worker and a real redis-server, with a fault-injecting TCP proxy between them
(tests/support/tcp_proxy.py); the producer talks to Redis directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery

from apportion.config.settings import Settings
from apportion.workers.app import create_app
from apportion.workers.redis.keys import Keys
from tests.conftest import load_example, own_redis_server
from tests.integration.conftest import short_redelivery, stream_job_ids, worker_env
from tests.support.processes import RedisServer, running_worker, wait_until
from tests.support.tcp_proxy import proxied

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.slow, pytest.mark.long]

VISIBILITY = 40
KEYS = Keys()
STREAM = KEYS.results_stream("partition")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    yield from own_redis_server(tmp_path / "redis")


def _queued_messages(server: RedisServer, job_ids: list[str]) -> list[bytes]:
    """The jobs as a Celery producer queues them, taken back off the queue: the test
    pushes each at the moment it chooses."""
    app: Celery = create_app(Settings(redis_url=server.url))
    try:
        job = load_example("partition.json")
        for job_id in job_ids:
            app.send_task("apportion.partition", args=[{**job, "job_id": job_id}])
    finally:
        app.close()
    client = server.client()
    items = [client.rpop("partition") for _ in job_ids]
    assert client.llen("partition") == 0
    return [item for item in items if item is not None]


def _blocked_takers(client_list: list[dict[str, str]]) -> list[str]:
    # BRPOP too: the test must fail, not wait forever, on a worker that takes so.
    return [
        c["id"] for c in client_list if c.get("cmd") in ("blmove", "brpop") and "b" in c["flags"]
    ]


def _push_while_blocked(client: redis.Redis, item: bytes) -> bool:
    """Push ``item`` in the same atomic step as a look at the clients: True when a
    worker was blocked in its take then (so the take moved ``item``)."""
    pipe = client.pipeline(transaction=True)
    pipe.client_list()
    pipe.lpush("partition", item)
    clients, _ = pipe.execute()
    return bool(_blocked_takers(clients))


def test_a_job_taken_while_the_connection_dies_silently_is_answered_once(
    server: RedisServer, tmp_path: Path
) -> None:
    job_ids = [f"frozen-{i}" for i in range(6)]
    items = _queued_messages(server, job_ids)
    client = server.client()
    env = worker_env(
        "",
        **short_redelivery(VISIBILITY, 10, 20),
        # kombu drops a blocking take's connection when its reply is this late (plus the
        # take's own second); every other connection waits this long for a reply.
        APPORTION_REDIS_HEALTH_CHECK_INTERVAL="2",
        APPORTION_REDIS_SOCKET_TIMEOUT="3",
    )
    with proxied(server.port) as proxy:
        env["APPORTION_REDIS_URL"] = proxy.url
        with running_worker(env, tmp_path / "worker.log", queues="partition", concurrency=1) as w:
            client.lpush("partition", items[0])
            wait_until(lambda: stream_job_ids(client, STREAM) == job_ids[:1], 60, what="job 0")

            frozen_takes = 0
            pushed = 1
            for item in items[1:]:
                # The worker idles in its blocking take; then every open connection goes
                # silent, and the job arrives: the take moves it, its reply is lost.
                wait_until(lambda: _blocked_takers(client.client_list()), 30, what="a take")
                proxy.freeze_open()
                frozen_takes += _push_while_blocked(client, item)
                pushed += 1
                wait_until(
                    lambda n=pushed: len(stream_job_ids(client, STREAM)) >= n,  # type: ignore[misc]
                    VISIBILITY,
                    what=f"the answer to job {pushed - 1}",
                )

            # Nothing left anywhere: every job was answered, none is still waiting.
            wait_until(lambda: not client.hlen("unacked"), 30, what="every ack")
            answered = stream_job_ids(client, STREAM)
            log = w.log_text()

    assert sorted(answered) == sorted(job_ids)  # each exactly once
    assert frozen_takes >= 3, f"only {frozen_takes} takes had their reply frozen"
    assert "by a connection that was lost are back on their queue" in log
    for name in client.zrange(KEYS.takers, 0, -1):
        assert client.llen(name) == 0
    assert client.llen("partition") == 0
