"""`apportion events` subscribers SIGKILLed mid-stream: nothing missed, nothing processed twice
beyond the one entry a dead consumer had printed but not yet acknowledged.

Real processes: a redis-server, result events written by the worker's own publisher
(workers/results/publisher.py, the Lua once-per-job script), and `apportion events --json`
subscriber processes in one consumer group. A consumer is SIGKILLed while it holds
unacknowledged entries (checked with XPENDING on the stopped process), restarted under
the same name (it re-reads its pending entries first), killed again, and its pending
entries are then claimed by a second consumer that is already running (XAUTOCLAIM,
swept periodically).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from apportion.contracts import Envelope
from apportion.workers.redis.keys import Keys
from apportion.workers.results.publisher import StreamPublisher
from tests.acceptance.cli import APPORTION
from tests.conftest import own_redis_server
from tests.support.processes import RedisServer, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]

STREAM = Keys().results_stream("partition")
GROUP = "faults-subscribers"
BEFORE = 3000  # events on the stream before the first subscriber starts
DURING = 1000  # events published while the subscribers run


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    yield from own_redis_server(tmp_path / "redis")


def publish(client: redis.Redis, start: int, n: int, pause: float = 0.0) -> None:
    publisher = StreamPublisher(client, Keys(), maxlen=100_000, dedup_ttl=3600)
    for i in range(start, start + n):
        envelope = Envelope(
            job_id=f"sub-{i}",
            kind="partition",
            status="ok",
            result={"disks": []},
            engine_version="test",
            elapsed_ms=0.0,
        )
        publisher.publish(envelope)
        if pause:
            time.sleep(pause)


def consumers(client: redis.Redis) -> set[str]:
    return {c["name"].decode() for c in client.xinfo_consumers(STREAM, GROUP)}


class Subscriber:
    """One `apportion events` process; its stdout (JSON lines) goes to a file."""

    # Every subscriber started by the running test, killed at its end whatever happened
    # (a failed assertion must not leave `apportion events` processes behind).
    started: list[Subscriber] = []

    def __init__(self, url: str, consumer: str, out: Path, *extra: str) -> None:
        self.consumer = consumer
        self.out = out
        self._file = out.open("wb")
        args = ["events", "--kind", "partition", "--group", GROUP, "--consumer", consumer]
        self.proc = subprocess.Popen(
            [APPORTION, *args, "--json", *extra],
            stdout=self._file,
            stderr=out.with_suffix(".err").open("wb"),
            env={**os.environ, "APPORTION_REDIS_URL": url, "PYTHONUNBUFFERED": "1"},
        )
        Subscriber.started.append(self)

    def entry_ids(self) -> list[str]:
        ids = []
        for line in self.out.read_bytes().splitlines():
            with contextlib.suppress(ValueError):  # a line cut short by the kill
                ids.append(json.loads(line)["id"])
        return ids

    def printed(self) -> int:
        return self.out.read_bytes().count(b"\n")

    def kill_holding_entries(self, client: redis.Redis, after: int = 0) -> set[str]:
        """SIGKILL, once it has printed ``after`` entries, while the consumer holds
        read-but-unacknowledged entries; return them. Both are checked while it is frozen
        (SIGSTOP), so however slow this test process is, the consumer cannot drain the
        stream between the check and the kill."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            os.kill(self.proc.pid, signal.SIGSTOP)  # freeze it: its pending list is stable
            if self.printed() >= after:
                pending = {
                    p["message_id"].decode()
                    for p in client.xpending_range(
                        STREAM, GROUP, min="-", max="+", count=10_000, consumername=self.consumer
                    )
                }
                if pending:
                    os.kill(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(10)
                    self._file.close()
                    return pending
            os.kill(self.proc.pid, signal.SIGCONT)  # between two batches: try again
            time.sleep(0.002)
        raise AssertionError(f"{self.consumer} never held unacknowledged entries")

    def wait_exit(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self._file.close()
        return code


@pytest.fixture(autouse=True)
def no_subscriber_left_running() -> Iterator[None]:
    yield
    while Subscriber.started:
        proc = Subscriber.started.pop().proc
        if proc.poll() is None:
            proc.kill()  # SIGKILL ends a SIGSTOPped process too
            proc.wait(10)


def test_killed_subscribers_resume_or_are_taken_over_without_missing_entries(
    server: RedisServer, tmp_path: Path
) -> None:
    client = server.client()
    publish(client, 0, BEFORE)
    # Events arrive while A is restarted and again once B has joined: B has entries of
    # its own to read however fast the restarted A drains the backlog.
    half = DURING // 2
    late = threading.Thread(target=publish, args=(server.client(), BEFORE, half, 0.002))
    later = threading.Thread(
        target=publish, args=(server.client(), BEFORE + half, DURING - half, 0.002)
    )

    # 1. Consumer A is killed mid-stream, then restarted under the same name.
    a1 = Subscriber(server.url, "A", tmp_path / "a1.jsonl")
    pending_a1 = a1.kill_holding_entries(client, after=800)
    a2 = Subscriber(server.url, "A", tmp_path / "a2.jsonl")
    late.start()
    wait_until(lambda: len(a2.entry_ids()) >= 800, 60, what="A again read 800 entries")

    # 2. Consumer B joins the group; A is killed again and B takes over its entries.
    b = Subscriber(server.url, "B", tmp_path / "b.jsonl", "--claim-idle-ms", "1000")
    wait_until(lambda: "B" in consumers(client), 30, what="B joined the group")
    later.start()
    pending_a2 = a2.kill_holding_entries(client)
    late.join(30)
    later.join(30)
    total = BEFORE + DURING
    wait_until(
        lambda: len(set(a1.entry_ids() + a2.entry_ids() + b.entry_ids())) >= total,
        60,
        what="every entry processed",
    )
    # B is still running: nothing is left pending in the group, for anyone.
    wait_until(lambda: client.xpending(STREAM, GROUP)["pending"] == 0, 10, what="all acked")
    b.proc.terminate()
    b.wait_exit(10)

    seen_a1, seen_a2, seen_b = a1.entry_ids(), a2.entry_ids(), b.entry_ids()
    stream_ids = [entry_id.decode() for entry_id, _ in client.xrange(STREAM)]
    processed = Counter(seen_a1 + seen_a2 + seen_b)
    twice = {entry_id for entry_id, n in processed.items() if n > 1}

    assert len(stream_ids) == total
    # None missed.
    assert set(processed) == set(stream_ids)
    # The restarted A re-read everything it held when killed; B claimed what A held
    # the second time (A never came back), and also read entries of its own.
    assert pending_a1 <= set(seen_a2)
    assert pending_a2 <= set(seen_b)
    assert len(seen_b) > len(pending_a2)
    # Processed twice: only an entry the dead consumer had printed but not acknowledged
    # (the CLI acknowledges each entry right after printing it: at most one per kill).
    assert twice <= pending_a1 | pending_a2
    assert len(twice) <= 2
    assert max(processed.values()) <= 2
    print(
        f"\n{total} entries; A killed holding {len(pending_a1)} then {len(pending_a2)} "
        f"unacknowledged; A/A'/B printed {len(seen_a1)}/{len(seen_a2)}/{len(seen_b)}; "
        f"processed twice: {len(twice)}"
    )
