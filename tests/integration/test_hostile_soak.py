"""The hostile soak, CI-sized: hundreds of generated queue items through a real worker.

The 10,000-item run is bench/hostile_soak.py (figures in bench/faults.md); this one
runs the same generator and the same judgement on fewer items: no worker death, every
decodable item answered (the same envelope on the stream and in the backend), every
valid job answered as the engine answers it in-process, every undecodable item
dead-lettered and never executed, and Redis memory growth bounded.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import own_redis_server
from tests.integration.conftest import worker_env
from tests.support.hostile_stream import HostileStream, all_settled, expected_results, judge
from tests.support.processes import RedisServer, Worker, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker, pytest.mark.slow]

ITEMS = 600


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    # A fixture, not a loop over the generator in the test: a failed assertion would keep
    # the generator (and its redis-server) alive in the traceback.
    yield from own_redis_server(tmp_path / "redis")


def test_hundreds_of_hostile_queue_items_leave_the_worker_serving_and_every_item_accounted_for(
    server: RedisServer, tmp_path: Path
) -> None:
    client = server.client()
    worker = Worker(env=worker_env(server.url), logfile=tmp_path / "worker.log")
    worker.start()
    try:
        pid = worker.proc.pid  # type: ignore[union-attr]
        before = int(client.info("memory")["used_memory"])
        stream = HostileStream(random.Random(13), tag="ci-soak")
        sent = list(stream.mix(ITEMS))
        for s in sent:
            client.lpush(s.queue, s.item)
        wait_until(
            lambda c=client, s=sent: all_settled(c, s), 240, interval=0.5, what="all settled"
        )
        verdict = judge(client, sent, expected_results())
        grown = int(client.info("memory")["used_memory"]) - before
        assert worker.alive
        assert worker.proc.pid == pid  # type: ignore[union-attr]
    finally:
        worker.stop()

    assert verdict.ok, verdict.summary()
    log = worker.log_text()
    assert "WorkerLostError" not in log
    assert "Unrecoverable error" not in log
    # Answers, markers and dead letters of 600 items (each dead letter keeps its
    # item, deep ones up to the copy limit): a few MiB, nowhere near a flood.
    assert grown < 64 * 1024 * 1024
    assert set(verdict.sent) == {"valid", "answered", "dead"}
