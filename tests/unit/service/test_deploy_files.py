"""docker-compose.yml and Procfile cannot be run here (no Docker engine), so they are
kept honest by parsing them: every command they name must exist in this project."""

from __future__ import annotations

import importlib
import importlib.util
import shlex
from pathlib import Path

import pytest
import yaml

from apportion import kinds

QUEUES = kinds.queues()

REPO = Path(__file__).resolve().parents[3]


def compose() -> dict[str, dict[str, object]]:
    data = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services: dict[str, dict[str, object]] = data["services"]
    return services


def procfile() -> dict[str, list[str]]:
    out = {}
    for line in (REPO / "Procfile").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, command = line.partition(":")
            out[name.strip()] = shlex.split(command)
    return out


def check_celery_command(argv: list[str]) -> str:
    """Validate a `celery -A MODULE SUBCOMMAND …` line; return what it runs."""
    assert argv[0] == "celery"
    app_module = argv[argv.index("-A") + 1]
    module = importlib.import_module(app_module)
    assert hasattr(module, "app"), f"{app_module} has no Celery `app`"
    sub = argv[argv.index("-A") + 2]
    if sub == "worker":
        queues = argv[argv.index("-Q") + 1].split(",")
        assert set(queues) <= set(QUEUES), f"unknown queue in {queues}"
        return "worker:" + ",".join(queues)
    assert sub == "flower"
    assert importlib.util.find_spec("flower") is not None, "flower is not installable extra"
    return "flower"


def test_every_compose_command_names_a_real_app_queue_or_flower() -> None:
    runs = []
    for name, service in compose().items():
        command = service.get("command")
        if name == "redis":
            continue
        assert isinstance(command, list), name
        runs.append(check_celery_command([str(c) for c in command]))

    assert sorted(r for r in runs if r.startswith("worker:")) == sorted(
        f"worker:{q}" for q in QUEUES
    )
    assert "flower" in runs


def test_compose_redis_keeps_an_append_only_file_on_a_volume() -> None:
    redis = compose()["redis"]

    command = [str(c) for c in redis["command"]]  # type: ignore[attr-defined]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert any(str(v).endswith(":/data") for v in redis["volumes"])  # type: ignore[attr-defined]


def test_the_procfile_runs_the_same_processes_as_compose() -> None:
    proc = procfile()
    runs = [check_celery_command(argv) for name, argv in proc.items() if name != "redis"]

    assert sorted(runs) == sorted(
        check_celery_command([str(c) for c in s["command"]])  # type: ignore[union-attr]
        for n, s in compose().items()
        if n != "redis"
    )
    redis = proc["redis"]
    assert redis[0] == "redis-server"
    assert redis[redis.index("--appendonly") + 1] == "yes"


@pytest.mark.parametrize("queue", ["attach", "launch", "partition"])
def test_long_queues_prefetch_one_message_at_a_time(queue: str) -> None:
    command = [str(c) for c in compose()[f"worker-{queue}"]["command"]]  # type: ignore[union-attr]

    assert command[command.index("--prefetch-multiplier") + 1] == "1"


def test_the_dockerfile_copies_only_paths_that_exist() -> None:
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            for src in line.split()[1:-1]:
                assert (REPO / src).exists(), src
