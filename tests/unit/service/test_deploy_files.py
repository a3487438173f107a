"""docker-compose.yml and the Procfile, read as files: every command they run exists in
this project, every queue has its worker, and the production choices are there.

Both are also started for real: the Procfile with honcho in
tests/integration/test_deployment.py; docker-compose.yml cannot be run here (no Docker
engine), so the same test validates it with `docker compose config` (or
`docker-compose config`) where one is installed.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from apportion import kinds
from apportion.cli import COMMANDS
from apportion.config.settings import Settings

QUEUES = kinds.queues()

REPO = Path(__file__).resolve().parents[3]


def compose(profile: str | None = None) -> dict[str, dict[str, Any]]:
    """The services ``docker compose up`` starts (``--profile PROFILE``: that profile's)."""
    data = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services: dict[str, dict[str, Any]] = data["services"]
    return {
        name: service
        for name, service in services.items()
        if (profile in service["profiles"] if "profiles" in service else profile is None)
    }


def procfile() -> dict[str, str]:
    out = {}
    for line in (REPO / "Procfile").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, command = line.partition(":")
            out[name.strip()] = command.strip()
    return out


def words(command: str) -> list[str]:
    """The command a Procfile line runs: past `VAR=value` prefixes and `exec`."""
    argv = shlex.split(command)
    while argv and (re.match(r"^[A-Z_]+=", argv[0]) or argv[0] == "exec"):
        argv = argv[1:]
    return argv


def runs(argv: list[str]) -> str:
    """What an `apportion …` or `celery -A … flower` command line starts."""
    if argv[:2] == ["apportion", "worker"]:
        queues = argv[argv.index("-Q") + 1].split(",")
        assert set(queues) <= set(QUEUES), f"unknown queue in {queues}"
        return "worker:" + ",".join(queues)
    if argv[0] == "apportion":
        assert argv[1] in COMMANDS, argv
        return argv[1]
    assert argv[:3] == ["celery", "-A", "apportion.workers.flower"], argv
    assert argv[3] == "flower"
    return "flower"


def test_compose_runs_one_worker_per_queue_flower_and_the_metrics_exporter() -> None:
    services = compose()
    started = sorted(
        runs([str(c) for c in s["command"]]) for n, s in services.items() if n != "redis"
    )

    assert started == sorted(["flower", "metrics", *(f"worker:{q}" for q in QUEUES)])


def test_compose_redis_keeps_an_append_only_file_on_a_volume_and_has_a_health_check() -> None:
    redis = compose()["redis"]

    command = [str(c) for c in redis["command"]]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert any(str(v).endswith(":/data") for v in redis["volumes"])
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]


@pytest.mark.parametrize("queue", QUEUES)
def test_each_compose_worker_is_checked_with_apportion_health_on_its_own_queue(queue: str) -> None:
    service = compose()[f"worker-{queue}"]

    test = service["healthcheck"]["test"]
    assert test[0] == "CMD-SHELL"
    argv = shlex.split(test[1])
    assert argv[:2] == ["apportion", "health"]
    assert argv[argv.index("--queue") + 1] == queue
    assert argv[argv.index("--node") + 1] == f"{queue}@$${{HOSTNAME}}"
    command = [str(c) for c in service["command"]]
    assert command[command.index("-n") + 1] == f"{queue}@%h"  # the name --node asks for
    assert service["depends_on"]["redis"]["condition"] == "service_healthy"


def test_compose_flower_requires_credentials_and_is_published_on_localhost_only() -> None:
    flower = compose()["flower"]

    assert flower["environment"]["FLOWER_BASIC_AUTH"].startswith("${FLOWER_BASIC_AUTH:?")
    assert flower["ports"] == ["127.0.0.1:5555:5555"]
    assert "healthcheck" in flower


@pytest.mark.parametrize("queue", ["attach", "launch", "partition"])
def test_long_queues_prefetch_one_message_at_a_time(queue: str) -> None:
    command = [str(c) for c in compose()[f"worker-{queue}"]["command"]]

    assert command[command.index("--prefetch-multiplier") + 1] == "1"


def test_every_apportion_setting_compose_sets_is_a_real_setting() -> None:
    known = {f"APPORTION_{name.upper()}" for name in Settings.model_fields}
    for name, service in {**compose(), **compose("sentinel")}.items():
        for variable in service.get("environment") or {}:
            if variable.startswith("APPORTION_"):
                assert variable in known, f"{name}: {variable}"


def test_the_procfile_runs_the_same_processes_as_compose() -> None:
    proc = procfile()
    started = sorted(runs(words(command)) for name, command in proc.items() if name != "redis")

    assert started == sorted(
        runs([str(c) for c in s["command"]]) for n, s in compose().items() if n != "redis"
    )


def test_the_procfile_redis_makes_its_directory_first_and_keeps_an_append_only_file() -> None:
    redis = procfile()["redis"]

    assert redis.startswith("mkdir -p var/redis && ")
    argv = words(redis.split("&&", 1)[1])
    assert argv[0] == "redis-server"
    assert argv[argv.index("--appendonly") + 1] == "yes"
    assert argv[argv.index("--dir") + 1] == "var/redis"


def test_the_procfile_flower_refuses_to_start_without_credentials() -> None:
    assert '--basic-auth="${FLOWER_BASIC_AUTH:?' in procfile()["flower"]


def test_the_dockerfile_copies_only_paths_that_exist() -> None:
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            for src in line.split()[1:-1]:
                assert (REPO / src).exists(), src


SENTINEL_URL = (
    "sentinel://sentinel-1:26379/0;sentinel://sentinel-2:26379;sentinel://sentinel-3:26379"
)


def test_the_sentinel_profile_runs_a_primary_two_replicas_and_three_sentinels() -> None:
    services = compose("sentinel")
    commands = {name: [str(c) for c in s["command"]] for name, s in services.items()}

    replicas = [n for n, c in commands.items() if "--replicaof" in c]
    sentinels = [n for n, c in commands.items() if c[0] == "sh" and "--sentinel" in c[-1]]
    assert sorted(replicas) == ["redis-replica-1", "redis-replica-2"]
    assert all(
        commands[n][commands[n].index("--replicaof") + 1] == "redis-primary" for n in replicas
    )
    assert sorted(sentinels) == ["sentinel-1", "sentinel-2", "sentinel-3"]
    assert all(
        "sentinel monitor apportion redis-primary 6379 2" in commands[n][-1] for n in sentinels
    )
    assert "--appendonly" in commands["redis-primary"]


def test_the_sentinel_profiles_worker_and_flower_know_only_the_sentinels() -> None:
    services = compose("sentinel")

    for name in ("sentinel-worker", "sentinel-flower"):
        environment = services[name]["environment"]
        assert environment["APPORTION_REDIS_URL"] == SENTINEL_URL
        assert environment["APPORTION_SENTINEL_MASTER"] == "apportion"
        assert set(services[name]["depends_on"]) == {"sentinel-1", "sentinel-2", "sentinel-3"}
        Settings(
            redis_url=environment["APPORTION_REDIS_URL"],
            sentinel_master=environment["APPORTION_SENTINEL_MASTER"],
        )
    flower = services["sentinel-flower"]
    assert flower["environment"]["FLOWER_BASIC_AUTH"].startswith("${FLOWER_BASIC_AUTH:?")
    assert all(port.startswith("127.0.0.1:") for port in flower["ports"])
    command = [str(c) for c in services["sentinel-worker"]["command"]]
    assert set(command[command.index("-Q") + 1].split(",")) == set(QUEUES)
