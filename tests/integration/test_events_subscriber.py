"""`apportion events` as a subscriber lives with it: it comes back as itself, cleans up
after consumers that are gone, says where it starts, and rides out Redis outages.

Real `apportion events` processes against a real redis-server of the test's own.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from apportion.workers.redis.keys import SUBSCRIBER_GROUP
from tests.acceptance.cli import APPORTION, apportion
from tests.conftest import own_redis_server
from tests.integration.test_faults_subscriber import STREAM, publish
from tests.support.processes import RedisServer, wait_until

pytestmark = [pytest.mark.redis]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    yield from own_redis_server(tmp_path / "redis")


class Events:
    """One `apportion events --kind partition --json ...` process."""

    def __init__(self, server: RedisServer, out: Path, *extra: str) -> None:
        self.out, self.err = out, out.with_suffix(".err")
        self.proc = subprocess.Popen(
            [APPORTION, "events", "--kind", "partition", "--json", *extra],
            stdout=out.open("wb"),
            stderr=self.err.open("wb"),
            env={**os.environ, "APPORTION_REDIS_URL": server.url, "PYTHONUNBUFFERED": "1"},
        )

    def job_ids(self) -> list[str]:
        lines = self.out.read_bytes().splitlines()
        return [json.loads(line)["job_id"] for line in lines if line.endswith(b"}")]

    def stderr(self) -> str:
        return self.err.read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def consumers(client: redis.Redis) -> dict[str, int]:
    return {
        c["name"].decode(): int(c["pending"])
        for c in client.xinfo_consumers(STREAM, SUBSCRIBER_GROUP)
    }


def test_a_restarted_subscriber_comes_back_as_itself_and_reads_its_own_pending_at_once(
    server: RedisServer, tmp_path: Path
) -> None:
    client = server.client()
    publish(client, 0, 5)
    # A subscriber that read five entries and died before acknowledging them.
    client.xgroup_create(STREAM, SUBSCRIBER_GROUP, id="0")
    client.xreadgroup(SUBSCRIBER_GROUP, socket.gethostname(), {STREAM: ">"}, count=5)

    # Claiming others' entries waits ten minutes: only reading its own can deliver them.
    again = Events(server, tmp_path / "again.jsonl", "--claim-idle-ms", "600000")
    try:
        wait_until(lambda: len(again.job_ids()) == 5, 30, what="its own five entries")
    finally:
        again.stop()

    assert again.job_ids() == [f"sub-{i}" for i in range(5)]
    assert consumers(client) == {socket.gethostname(): 0}
    assert "5 pending (5 of them this consumer's, read again first)" in again.stderr()


def test_consumers_idle_for_longer_than_forget_idle_are_removed_once_their_entries_are_claimed(
    server: RedisServer, tmp_path: Path
) -> None:
    client = server.client()
    publish(client, 0, 3)
    client.xgroup_create(STREAM, SUBSCRIBER_GROUP, id="0")
    client.xgroup_createconsumer(STREAM, SUBSCRIBER_GROUP, "gone-empty")
    client.xreadgroup(SUBSCRIBER_GROUP, "gone-holding", {STREAM: ">"}, count=2)

    events = Events(
        server,
        tmp_path / "e.jsonl",
        "--consumer",
        "live",
        "--forget-idle",
        "1",
        "--claim-idle-ms",
        "500",
    )
    try:
        wait_until(lambda: set(consumers(client)) == {"live"}, 30, what="only the live one")
        wait_until(lambda: len(events.job_ids()) == 3, 10, what="all three entries")
    finally:
        events.stop()

    assert sorted(events.job_ids()) == ["sub-0", "sub-1", "sub-2"]


def test_a_second_run_says_what_the_group_already_consumed_and_from_start_reads_it_all(
    server: RedisServer,
) -> None:
    client = server.client()
    publish(client, 0, 3)
    env = {"APPORTION_REDIS_URL": server.url}
    common = ("events", "--kind", "partition", "--json")

    first = apportion(*common, "--count", "3", env=env)
    second = apportion(*common, "--idle-exit", "1", env=env)
    replay = apportion(*common, "--from-start", "--count", "3", env=env)

    assert first.returncode == second.returncode == replay.returncode == 0
    assert len(first.stdout.splitlines()) == 3
    assert second.stdout == ""
    assert (
        f"{STREAM}: group 'apportion-subscribers', consumer '{socket.gethostname()}': "
        "3 entries already delivered to the group" in second.stderr
    )
    assert "--from-start reads everything the streams hold" in second.stderr
    assert [json.loads(line)["job_id"] for line in replay.stdout.splitlines()] == [
        "sub-0",
        "sub-1",
        "sub-2",
    ]
    [group] = client.xinfo_groups(STREAM)
    assert (group["entries-read"], group["lag"], group["pending"]) == (3, 0, 0)


def test_events_follows_on_across_an_outage_longer_than_its_connect_timeout(
    server: RedisServer, tmp_path: Path
) -> None:
    server.appendonly = True
    server.restart()
    publish(server.client(), 0, 1)
    events = Events(server, tmp_path / "e.jsonl", "--connect-timeout", "1")
    # Its own group: in the same one, the two would share the entries between them.
    leaving = Events(
        server,
        tmp_path / "x.jsonl",
        "--group",
        "leaving",
        "--connect-timeout",
        "1",
        "--exit-on-disconnect",
    )
    try:
        wait_until(lambda: len(events.job_ids()) == 1, 30, what="the first entry")
        server.stop()
        wait_until(lambda: leaving.proc.poll() is not None, 30, what="--exit-on-disconnect exit")
        assert "retrying" in events.stderr()
        server.start()
        publish(server.client(), 1, 1)
        wait_until(lambda: len(events.job_ids()) == 2, 30, what="the entry after the outage")
    finally:
        events.stop()
        leaving.stop()

    assert events.job_ids() == ["sub-0", "sub-1"]
    assert leaving.proc.returncode == 1
    assert "cannot reach Redis" in leaving.stderr()
