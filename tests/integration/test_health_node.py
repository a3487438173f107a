"""`apportion health --node`: this worker must answer, on top of everything else.

Two real workers share the queues (one consumes `partition`, the other the rest); a
health check naming either reports every queue consumed, and a named worker that does
not answer is the only problem.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.acceptance.cli import apportion
from tests.integration.conftest import worker_env
from tests.support.processes import RedisServer, Worker, running_worker

pytestmark = [pytest.mark.redis, pytest.mark.worker]


@pytest.fixture(scope="module")
def split_workers(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Worker, Worker]]:
    logs = tmp_path_factory.mktemp("split")
    env = worker_env(redis_server.url)
    with (
        running_worker(env, logs / "p.log", queues="partition", concurrency=1) as p,
        running_worker(env, logs / "o.log", queues="attach,launch,events", concurrency=1) as o,
    ):
        yield p, o


def test_health_naming_one_worker_still_sees_the_workers_of_every_queue(
    split_workers: tuple[Worker, Worker], redis_server: RedisServer
) -> None:
    env = {"APPORTION_REDIS_URL": redis_server.url}
    report = json.loads(apportion("health", "--json", "--timeout", "3", env=env).stdout)
    [partition_worker] = report["queues"]["partition"]["workers"]

    named = apportion("health", "--node", partition_worker, "--timeout", "3", env=env)
    gone = apportion("health", "--node", "gone@nowhere", "--timeout", "3", env=env)

    assert named.returncode == 0, named.stdout
    assert gone.returncode == 1
    assert [line for line in gone.stdout.splitlines() if line.startswith("problem:")] == [
        "problem: worker gone@nowhere did not answer"
    ]
