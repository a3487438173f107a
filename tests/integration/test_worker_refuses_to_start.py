"""A worker configured in a way it cannot run with exits at start, saying why.

Celery swallows an exception raised in a ``worker_init`` handler (it only logs it), so
without apportion's own exit these workers would start and run jobs without their
default policy or launcher. Each case starts a real worker against the test Redis.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import worker_env
from tests.support.processes import RedisServer, Worker, free_port

pytestmark = [pytest.mark.redis, pytest.mark.worker]

BAD_POLICY = "- module: equal\n- module: failure_penalty\n  percnt: 5\n"


@pytest.mark.parametrize(
    ("setting", "why"),
    [
        (
            "default_policy",
            "the default policy file cannot be stored: policy[1].percnt: unknown field "
            "'percnt'; did you mean 'percent'?",
        ),
        (
            "launcher",
            "APPORTION_LAUNCHER='bogus' is not a launcher; choose one of: none, simulated",
        ),
    ],
)
def test_a_worker_that_cannot_run_as_configured_exits_at_start_saying_why(
    setting: str, why: str, redis_server: RedisServer, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(BAD_POLICY)
    extra = (
        {"APPORTION_DEFAULT_POLICY_FILE": str(policy)}
        if setting == "default_policy"
        else {"APPORTION_LAUNCHER": "bogus"}
    )
    metrics = tmp_path / "tmp"
    metrics.mkdir()
    env = worker_env(
        redis_server.url, APPORTION_METRICS_PORT=str(free_port()), TMPDIR=str(metrics), **extra
    )
    worker = Worker(env=env, logfile=tmp_path / "worker.log", queues="launch")

    try:
        with pytest.raises(RuntimeError, match="worker exited at start") as exited:
            worker.start()
    finally:
        worker.stop()  # a worker that did start (the failure case) is not left running

    assert worker.proc is not None
    assert worker.proc.wait(10) == 1
    assert f"apportion worker: {why}" in str(exited.value)
    assert list(metrics.iterdir()) == []  # its metrics files removed on the way out
