"""The policy store through real workers: the envelope names the policy and version that
decided, a saved version reaches every worker without a restart, and a store that cannot
be read holds the job back rather than answer it with another policy.

Two workers share one Redis database for the store and the results, each with a broker
database of its own: every job sent to a worker's broker is run by that very worker.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from apportion.config.settings import Settings
from apportion.engine_settings import load_default_policy
from apportion.workers.app import create_app
from apportion.workers.policies.store import PolicyStore
from apportion.workers.redis.keys import Keys
from tests.integration.conftest import worker_env
from tests.support.processes import RedisServer, Worker, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker]

STORE_DB, BROKER_DBS = 11, (12, 13)


def url(server: RedisServer, db: int) -> str:
    return f"redis://127.0.0.1:{server.port}/{db}"


def job(**extra: Any) -> dict[str, Any]:
    host = {"VCPU": {"total": 8}}
    return {
        "providers": [{"uuid": f"{a}-h", "account": a, "inventories": host} for a in "abc"],
        "request": "resources=VCPU:1",
        "failures": {},
        "seed": 1,
        **extra,
    }


@pytest.fixture(scope="module")
def store_client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(url(redis_server, STORE_DB))
    client.flushdb()
    for db in BROKER_DBS:
        redis.Redis.from_url(url(redis_server, db)).flushdb()
    yield client
    client.close()


@pytest.fixture(scope="module")
def workers(
    redis_server: RedisServer, store_client: redis.Redis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Worker]]:
    logs = tmp_path_factory.mktemp("policy-workers")
    started = [
        Worker(
            env=worker_env(url(redis_server, STORE_DB), APPORTION_BROKER_URL=url(redis_server, db)),
            queues="launch",
            concurrency=1,
            logfile=Path(logs / f"worker-{db}.log"),
        )
        for db in BROKER_DBS
    ]
    # Both boot at once: the suite pays for one boot, not two.
    threads = [threading.Thread(target=w.start) for w in started]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        for w in started:
            assert w.alive, w.log_text()[-3000:]
        yield started
    finally:
        for w in started:
            w.stop()


@pytest.fixture(scope="module")
def producers(redis_server: RedisServer, workers: list[Worker]) -> Iterator[list[Celery]]:
    apps = [
        create_app(
            Settings(redis_url=url(redis_server, STORE_DB), broker_url=url(redis_server, db))
        )
        for db in BROKER_DBS
    ]
    yield apps
    for app in apps:
        app.close()


@pytest.fixture
def store(store_client: redis.Redis) -> PolicyStore:
    return PolicyStore(store_client, Keys())


def answer(app: Celery, payload: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    env: dict[str, Any] = app.send_task("apportion.launch_select", args=[payload]).get(
        timeout=timeout
    )
    assert env["status"] == "ok", env
    return env


def modules(env: dict[str, Any]) -> list[str]:
    return [step["module"] for step in env["result"]["selection"]["trace"]]


def test_workers_seed_the_default_from_the_policy_file_once(
    workers: list[Worker], store: PolicyStore
) -> None:
    default = store.current("default")
    policy = load_default_policy()

    assert default is not None
    assert policy is not None
    assert (default.version, default.policy) == (1, list(policy))
    assert [v.version for v in store.history("default")] == [1]


def test_the_envelope_records_the_pool_and_version_that_decided(
    producers: list[Celery], store: PolicyStore
) -> None:
    pool = f"gpu-{uuid.uuid4().hex[:8]}"
    store.save(pool, [{"module": "equal"}, {"module": "cost"}], author="test")
    saved = store.save(pool, [{"module": "least_used"}, {"module": "priority"}], author="test")
    default = store.current("default")
    assert default is not None
    app = producers[0]

    own = answer(app, job(pool=pool))
    fallback = answer(app, job(pool=f"none-{uuid.uuid4().hex[:8]}"))
    inline = answer(app, job(pool=pool, policy=[{"module": "equal"}]))
    candidates = app.send_task("apportion.launch_select", args=[job(policy=None)]).get(timeout=60)

    assert own["result"]["policy"] == {"source": "pool", "pool": pool, "version": saved.version}
    assert modules(own) == ["least_used", "priority"]
    assert fallback["result"]["policy"] == {
        "source": "default",
        "pool": "default",
        "version": default.version,
    }
    assert modules(fallback) == [m["module"] for m in default.policy]
    assert inline["result"]["policy"] == {"source": "inline", "pool": None, "version": None}
    assert candidates["result"]["policy"] == {"source": "none", "pool": None, "version": None}


def test_two_workers_both_use_a_new_version_for_their_next_jobs(
    producers: list[Celery], store: PolicyStore
) -> None:
    pool = f"batch-{uuid.uuid4().hex[:8]}"
    v1 = store.save(pool, [{"module": "equal"}], author="test", comment="v1")

    before = [answer(app, job(pool=pool)) for app in producers]
    v2 = store.save(pool, [{"module": "equal"}, {"module": "cost"}], author="test", comment="v2")
    after = [answer(app, job(pool=pool)) for app in producers]

    for env in before:
        assert env["result"]["policy"] == {"source": "pool", "pool": pool, "version": v1.version}
        assert modules(env) == ["equal"]
    for env in after:
        assert env["result"]["policy"] == {"source": "pool", "pool": pool, "version": v2.version}
        assert modules(env) == ["equal", "cost"]


def retries_logged(worker: Worker, pool: str) -> int:
    """How many times ``worker`` logged a retry because ``pool``'s record is unreadable."""
    unreadable = f"record of pool '{pool}' is unreadable"
    return sum(
        1 for line in worker.log_text().splitlines() if unreadable in line and "; retry " in line
    )


def test_a_store_record_that_cannot_be_read_holds_the_job_until_a_good_version_is_saved(
    producers: list[Celery], workers: list[Worker], store: PolicyStore, store_client: redis.Redis
) -> None:
    pool = f"broken-{uuid.uuid4().hex[:8]}"
    store.save(pool, [{"module": "equal"}], author="test")
    store_client.hset(Keys().policy(pool), "current", b"{not json")

    pending = producers[1].send_task("apportion.launch_select", args=[job(pool=pool)])
    # Tried, and tried again after its retry: still no answer, and no other policy used.
    wait_until(lambda: retries_logged(workers[1], pool) >= 2, timeout=60, what="two retries")
    assert not pending.ready()

    fixed = store.save(pool, [{"module": "equal"}, {"module": "priority"}], author="test")
    env: dict[str, Any] = pending.get(timeout=60)

    assert env["status"] == "ok"
    assert env["result"]["policy"] == {"source": "pool", "pool": pool, "version": fixed.version}
    assert modules(env) == ["equal", "priority"]
