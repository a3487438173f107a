"""Redis over TLS (``rediss://``), with a certificate the worker and the commands check.

A CA and a server certificate for 127.0.0.1 are made for the test with the openssl
command; redis-server serves TLS only (``--port 0 --tls-port …``). The worker, ``apportion
submit --wait`` and ``apportion health`` connect with
``rediss://:PASSWORD@127.0.0.1:PORT/0?ssl_cert_reqs=required&ssl_ca_certs=CA``. Debian's
and Ubuntu's redis-server are built with TLS; one built without it skips this test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.cli import apportion
from tests.conftest import load_example
from tests.integration.conftest import worker_env
from tests.integration.test_interop import NODE_PRODUCER, _node
from tests.support.processes import RedisServer, free_port, running_worker

pytestmark = [pytest.mark.redis, pytest.mark.worker]

PASSWORD = f"tls-{uuid.uuid4().hex}"


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """(server certificate, server key, CA certificate), made with the openssl command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is needed to make the test's certificates")
    ca_key, ca, key, csr, cert = (
        folder / n for n in ("ca.key", "ca.pem", "s.key", "s.csr", "s.pem")
    )
    (folder / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    days, rsa = ["-days", "1"], ["-newkey", "rsa:2048", "-nodes"]
    for argv in (
        [
            "req",
            "-x509",
            *rsa,
            *days,
            "-subj",
            "/CN=test CA",
            "-keyout",
            str(ca_key),
            "-out",
            str(ca),
        ],
        ["req", *rsa, "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(csr)],
        ["x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial"],
    ):
        if argv[0] == "x509":
            argv += [*days, "-out", str(cert), "-extfile", str(folder / "san.cnf")]
        subprocess.run([openssl, *argv], check=True, capture_output=True, timeout=60)
    return cert, key, ca


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    folder = tmp_path_factory.mktemp("redis-tls")
    certificates = make_certificates(folder)
    server = RedisServer(free_port(), folder, password=PASSWORD, tls=certificates)
    try:
        server.start()
    except TimeoutError:
        server.stop()
        log = (folder / "redis.log").read_text(errors="replace")
        if "tls" in log.lower() and ("bad directive" in log.lower() or "not" in log.lower()):
            pytest.skip("this redis-server is built without TLS")
        raise
    yield server
    server.stop()


def node_producer(server: RedisServer, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The Node producer over TLS, given the workers' own APPORTION_REDIS_URL (with its
    ssl_cert_reqs and ssl_ca_certs options): one URL for every process."""
    job_file = tmp_path / "node-job.json"
    job_file.write_text(json.dumps({**load_example("partition.json"), "job_id": "node-tls"}))
    environ = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "NODE_EXTRA_CA_CERTS")}
    return subprocess.run(
        [_node(), str(NODE_PRODUCER / "producer.mjs"), "partition", str(job_file)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**environ, "APPORTION_REDIS_URL": server.url},
    )


def test_the_worker_submit_health_and_the_node_producer_work_over_tls(
    server: RedisServer, tmp_path: Path
) -> None:
    env = {"APPORTION_REDIS_URL": server.url}
    job = {**load_example("partition.json"), "job_id": f"tls-{uuid.uuid4()}"}
    with running_worker(worker_env(server.url), tmp_path / "worker.log", concurrency=1) as worker:
        submitted = apportion("submit", "partition", "-", "--wait", stdin=json.dumps(job), env=env)
        health = apportion("health", "--timeout", "2", env=env)
        node = node_producer(server, tmp_path)
        log = worker.log_text()

    assert submitted.returncode == 0, submitted.stderr
    assert json.loads(submitted.stdout)["job_id"] == job["job_id"]
    assert health.returncode == 0, health.stdout
    assert (
        f"redis   rediss://:***@127.0.0.1:{server.port}/0?ssl_cert_reqs=required" in health.stdout
    )
    assert node.returncode == 0, node.stderr
    assert json.loads(node.stdout)["envelope"]["status"] == "ok"
    assert "rediss://" in log
    assert PASSWORD not in log + health.stdout + submitted.stderr


def test_a_certificate_from_another_ca_is_refused(server: RedisServer, tmp_path: Path) -> None:
    _, _, other_ca = make_certificates(tmp_path)
    url = server.url.replace(str(server.tls[2]), str(other_ca))  # type: ignore[index]

    health = apportion("health", "--timeout", "5", env={"APPORTION_REDIS_URL": url})

    assert health.returncode == 1
    assert "certificate verify failed" in health.stdout
