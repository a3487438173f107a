"""The ACL users of docs/operations.md, one per role, against a real Redis.

The ``ACL SETUSER`` lines are read from the document (not re-typed here), applied to a
redis-server whose default user is the administrator, and each role runs as its own
user: a real worker (and its health check, metrics and dead-letters), a producer
(`apportion submit --wait`, the Node producer), a subscriber (`apportion events`) and
the studio (`apportion policy`, `apportion studio`). Every job is answered, health
exits 0, and Redis logged no denied command, key or channel (``ACL LOG``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from bench.bench_placement import SIMPLE, numa_cloud
from tests.acceptance.cli import APPORTION, apportion
from tests.conftest import load_example, running
from tests.integration.conftest import worker_env
from tests.integration.test_interop import NODE_PRODUCER, _node
from tests.support.processes import RedisServer, Worker, free_port, running_worker, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker]

REPO = Path(__file__).resolve().parents[2]
ADMIN = f"admin-{uuid.uuid4().hex}"
ROLES = ("worker", "producer", "subscriber", "studio")
PASSWORDS = {role: f"{role}-{uuid.uuid4().hex}" for role in ROLES}


def acl_lines() -> dict[str, str]:
    """The documented ``ACL SETUSER`` line of each role, by role."""
    text = (REPO / "docs" / "operations.md").read_text()
    lines = re.findall(r"^ACL SETUSER apportion-(\w+) .*$", text, flags=re.MULTILINE)
    found = {
        m.group(1): m.group(0)
        for m in re.finditer(r"^ACL SETUSER apportion-(\w+) .*$", text, flags=re.MULTILINE)
    }
    assert sorted(found) == sorted(ROLES), lines
    return found


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(
        port=free_port(), workdir=tmp_path_factory.mktemp("redis-acl"), password=ADMIN
    )
    for admin in running(server):
        client = admin.client()
        for role, line in acl_lines().items():
            words = line.replace(f">{role.upper()}_PASSWORD", f">{PASSWORDS[role]}").split()
            assert client.execute_command(*words) in (b"OK", "OK", True)
        client.acl_log_reset()
        yield admin


def url(server: RedisServer, role: str) -> str:
    return f"redis://apportion-{role}:{PASSWORDS[role]}@127.0.0.1:{server.port}/0"


def env(server: RedisServer, role: str) -> dict[str, str]:
    return {"APPORTION_REDIS_URL": url(server, role)}


@pytest.fixture(scope="module")
def worker(server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    log = tmp_path_factory.mktemp("worker-acl") / "worker.log"
    with running_worker(worker_env(url(server, "worker")), log, concurrency=1) as w:
        yield w


def denied(server: RedisServer) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = server.client().acl_log()
    return entries


def test_the_documented_users_run_every_role_and_redis_denies_none_of_them(
    server: RedisServer, worker: Worker, tmp_path: Path
) -> None:
    job_id = f"acl-{uuid.uuid4()}"
    partition = {**load_example("partition.json"), "job_id": job_id}
    outcome = {**load_example("launch_outcome.json"), "at": datetime.now(UTC).isoformat()}
    policy = tmp_path / "gpu.yaml"
    policy.write_text((REPO / "config" / "default_policy.yaml").read_text())

    health = apportion("health", "--timeout", "3", env=env(server, "worker"))
    submitted = apportion(
        "submit",
        "partition",
        "-",
        "--wait",
        stdin=json.dumps(partition),
        env=env(server, "producer"),
    )
    recorded = apportion(
        "submit",
        "launch_outcome",
        "-",
        "--wait",
        stdin=json.dumps(outcome),
        env=env(server, "producer"),
    )
    selected = apportion(
        "submit",
        "launch_select",
        str(REPO / "examples" / "launch_select.json"),
        "--wait",
        env=env(server, "producer"),
    )
    events = apportion(
        "events", "--kind", "partition", "--json", "--count", "1", env=env(server, "subscriber")
    )
    saved = apportion(
        "policy", "set", "gpu", str(policy), "--comment", "acl", env=env(server, "studio")
    )
    listed = apportion("policy", "list", env=env(server, "studio"))
    metrics = apportion("metrics", "--once", env=env(server, "worker"))
    dead = apportion("dead-letters", env=env(server, "worker"))

    assert health.returncode == 0, health.stdout
    assert submitted.returncode == 0, submitted.stderr
    assert json.loads(submitted.stdout)["status"] == "ok"
    assert json.loads(recorded.stdout)["result"]["recorded"] is True, recorded.stdout
    assert json.loads(selected.stdout)["status"] == "ok", selected.stdout
    assert [json.loads(line)["job_id"] for line in events.stdout.splitlines()] == [job_id]
    assert saved.returncode == 0, saved.stderr
    assert "gpu" in listed.stdout
    assert metrics.returncode == 0, metrics.stdout
    assert dead.returncode == 0, dead.stderr
    assert denied(server) == []


def test_the_studio_serves_the_policy_store_as_its_user(server: RedisServer) -> None:
    port = free_port()
    studio = subprocess.Popen(
        [APPORTION, "studio", "--port", str(port)],
        env={**os.environ, **env(server, "studio")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def get(path: str) -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return int(reply.status)

    def up() -> bool:
        try:
            return get("/api/state") == 200
        except OSError:
            return False

    try:
        wait_until(up, 60, what="the studio answering")
        assert get("/api/policy?pool=default") == 200
    finally:
        os.killpg(studio.pid, signal.SIGTERM)
        studio.wait(10)
    assert denied(server) == []


def test_the_node_producer_sends_and_reads_its_answer_as_the_producer(
    server: RedisServer, worker: Worker, tmp_path: Path
) -> None:
    job = {**load_example("partition.json"), "job_id": f"node-acl-{uuid.uuid4()}"}
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(job))

    proc = subprocess.run(
        [_node(), str(NODE_PRODUCER / "producer.mjs"), "partition", str(job_file)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "REDIS_URL": url(server, "producer")},
    )

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["envelope"]["job_id"] == job["job_id"]
    assert denied(server) == []


def test_the_worker_user_may_not_touch_another_services_keys(server: RedisServer) -> None:
    client = redis.Redis.from_url(url(server, "worker"))
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.get("billing:invoices")
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.info()
    server.client().acl_log_reset()


def test_health_names_a_permission_its_user_lacks_rather_than_calling_redis_unreachable(
    server: RedisServer,
) -> None:
    password = uuid.uuid4().hex
    admin = server.client()
    admin.execute_command(
        "ACL", "SETUSER", "bare", "reset", "on", f">{password}", "+hello", "+ping", "~*"
    )
    bare = {"APPORTION_REDIS_URL": f"redis://bare:{password}@127.0.0.1:{server.port}/0"}

    proc = apportion("health", "--timeout", "1", env=bare)

    assert proc.returncode == 1
    assert "ok (Redis 7" in proc.stdout or "ok (Redis" in proc.stdout
    assert "problem: the Redis user may not run what health reads (" in proc.stdout
    assert "unreachable" not in proc.stdout
    admin.acl_log_reset()


def test_flower_follows_the_workers_as_the_worker_user(
    server: RedisServer, worker: Worker, tmp_path: Path
) -> None:
    import base64
    import sys

    port = free_port()
    log = tmp_path / "flower.log"
    with open(log, "wb") as out:
        flower = subprocess.Popen(
            [
                *(sys.executable, "-m", "celery", "-A", "apportion.workers.flower", "flower"),
                *("--address=127.0.0.1", f"--port={port}"),
            ],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env(server, "worker"), "FLOWER_BASIC_AUTH": "ops:secret"},
            start_new_session=True,
        )

    def workers() -> dict[str, object]:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/workers?refresh=1")
        request.add_header("Authorization", "Basic " + base64.b64encode(b"ops:secret").decode())
        with urllib.request.urlopen(request, timeout=10) as reply:
            found: dict[str, object] = json.loads(reply.read())
            return found

    def sees_the_worker() -> bool:
        try:
            return bool(workers())
        except OSError:
            return False

    try:
        wait_until(sees_the_worker, 60, what="Flower listing the worker")
        wait_until(
            lambda: "Events of group {task} enabled by remote" in worker.log_text(),
            30,
            what="Flower switching the worker's task events on",
        )
    finally:
        os.killpg(flower.pid, signal.SIGTERM)
        flower.wait(20)
    assert [(d["reason"], d["object"]) for d in denied(server)] == []


def test_the_subscriber_user_reads_a_big_envelope_the_stream_entry_refers_to(
    server: RedisServer, worker: Worker
) -> None:
    # 100 hosts: 400 candidates, an answer over the 64 KiB kept once, in the backend.
    job_id = f"acl-big-{uuid.uuid4()}"
    job = {"job_id": job_id, "providers": numa_cloud(100), "request": SIMPLE}

    submitted = apportion(
        "submit", "launch_select", "-", "--wait", stdin=json.dumps(job), env=env(server, "producer")
    )
    events = apportion(
        "events",
        *("--kind", "launch_select", "--group", f"big-{uuid.uuid4()}", "--json"),
        *("--idle-exit", "3"),
        env=env(server, "subscriber"),
    )

    assert submitted.returncode == 0, submitted.stderr
    assert len(json.loads(submitted.stdout)["result"]["allocation_requests"]) == 400
    [line] = [json.loads(x) for x in events.stdout.splitlines() if job_id in x]
    assert "envelope_key" in line
    assert len(line["envelope"]["result"]["allocation_requests"]) == 400
    assert denied(server) == []
