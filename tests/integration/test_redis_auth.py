"""A password-protected Redis: every connection authenticates, no secret is ever shown.

One redis-server with ``requirepass`` (the default user's password) and an ACL user
of its own (``--user apportion on >… ~* &* +@all``). The worker, ``apportion events``
and the Node producer log in as the ACL user (``redis://apportion:SECRET@…``),
``apportion submit`` and ``health`` with the password alone (``redis://:SECRET@…``).
Neither password may appear in the worker's log or in any command's output, where
URLs are shown with ``***`` in its place.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.cli import apportion
from tests.conftest import load_example, running
from tests.integration.conftest import worker_env
from tests.integration.test_interop import NODE_PRODUCER, _node
from tests.support.processes import RedisServer, Worker, free_port, running_worker

pytestmark = [pytest.mark.redis, pytest.mark.worker]

PASSWORD = f"pw-{uuid.uuid4().hex}"  # the default user's (requirepass)
ACL_PASSWORD = f"acl-{uuid.uuid4().hex}"  # the ACL user's
SECRETS = (PASSWORD, ACL_PASSWORD)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    yield from running(
        RedisServer(
            port=free_port(),
            workdir=tmp_path_factory.mktemp("redis-auth"),
            password=PASSWORD,
            extra_args=("--user", "apportion", "on", f">{ACL_PASSWORD}", "~*", "&*", "+@all"),
        )
    )


def acl_url(server: RedisServer) -> str:
    return f"redis://apportion:{ACL_PASSWORD}@127.0.0.1:{server.port}/0"


def password_url(server: RedisServer) -> str:
    return f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0"


@pytest.fixture(scope="module")
def worker(server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    log = tmp_path_factory.mktemp("worker-auth") / "worker.log"
    with running_worker(worker_env(acl_url(server)), log, concurrency=1) as w:
        yield w


def no_secret(*texts: str) -> bool:
    return not any(secret in text for secret in SECRETS for text in texts)


def test_redis_refuses_clients_without_the_password(server: RedisServer) -> None:
    proc = apportion(
        "health", env={"APPORTION_REDIS_URL": f"redis://127.0.0.1:{server.port}/0"}, timeout=60
    )
    assert proc.returncode == 1
    assert "Authentication required" in proc.stdout or "NOAUTH" in proc.stdout


def test_submit_events_and_health_work_with_a_password_and_an_acl_user_and_never_show_them(
    server: RedisServer, worker: Worker
) -> None:
    job_id = f"auth-{uuid.uuid4()}"
    job = {**load_example("partition.json"), "job_id": job_id}
    submitted = apportion(
        "submit",
        "partition",
        "-",
        "--wait",
        stdin=json.dumps(job),
        env={"APPORTION_REDIS_URL": password_url(server)},
    )
    events = apportion(
        "events",
        "--kind",
        "partition",
        "--json",
        "--count",
        "1",
        "--idle-exit",
        "10",
        env={"APPORTION_REDIS_URL": acl_url(server)},
    )
    health = apportion(
        "health", "--timeout", "2", env={"APPORTION_REDIS_URL": password_url(server)}
    )
    as_json = apportion(
        "health", "--json", "--timeout", "2", env={"APPORTION_REDIS_URL": acl_url(server)}
    )

    assert submitted.returncode == 0, submitted.stderr
    assert json.loads(submitted.stdout)["status"] == "ok"
    assert events.returncode == 0, events.stderr
    assert job_id in [json.loads(line)["job_id"] for line in events.stdout.splitlines()]
    assert health.returncode == 0, health.stdout
    assert f"redis   redis://:***@127.0.0.1:{server.port}/0  ok" in health.stdout
    assert json.loads(as_json.stdout)["redis"]["url"] == (
        f"redis://apportion:***@127.0.0.1:{server.port}/0"
    )
    outputs = [p.stdout + p.stderr for p in (submitted, events, health, as_json)]
    assert no_secret(*outputs, worker.log_text())


def test_a_wrong_password_is_reported_without_the_password(server: RedisServer) -> None:
    wrong = f"redis://apportion:not-{ACL_PASSWORD}@127.0.0.1:{server.port}/0"
    health = apportion("health", "--timeout", "5", env={"APPORTION_REDIS_URL": wrong})
    submit = apportion(
        "submit",
        "partition",
        "-",
        "--connect-retries",
        "1",
        stdin=json.dumps(load_example("partition.json")),
        env={"APPORTION_REDIS_URL": wrong},
        timeout=60,
    )

    assert health.returncode == 1
    assert "invalid username-password pair" in health.stdout
    assert submit.returncode == 1
    assert "cannot reach the broker at redis://apportion:***@" in submit.stderr
    assert "Traceback" not in submit.stderr
    assert no_secret(health.stdout, health.stderr, submit.stdout, submit.stderr)


def test_the_node_producer_logs_in_as_the_acl_user(
    server: RedisServer, worker: Worker, tmp_path: Path
) -> None:
    import os
    import subprocess

    job = {**load_example("partition.json"), "job_id": f"node-auth-{uuid.uuid4()}"}
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(job))

    proc = subprocess.run(
        [_node(), str(NODE_PRODUCER / "producer.mjs"), "partition", str(job_file)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "APPORTION_REDIS_URL": acl_url(server)},
    )

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["envelope"]["job_id"] == job["job_id"]
    assert no_secret(proc.stdout, proc.stderr, worker.log_text())
