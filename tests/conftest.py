"""Shared fixtures. The real-Redis fixtures start a dedicated redis-server.

In CI (``CI`` or ``APPORTION_REQUIRE_REDIS`` set) a missing redis-server is a
failure, never a skip: the integration suite must run there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest
from hypothesis import settings

from tests.support.golden import maybe_install
from tests.support.processes import RedisServer, free_port
from tests.support.schedule import start_order

# `pytest --hypothesis-profile=deep`: ten times the examples, for every property test that
# leaves the count to the profile and every comparison (tests/support/samples.py).
settings.register_profile("deep", max_examples=1_000)

# APPORTION_GOLDEN_RECORD=DIR records every job an engine answers (tests/support/golden.py).
maybe_install()


@pytest.hookimpl(trylast=True)  # after any plugin that reorders the tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long files first (tests/support/schedule.py); scripts/test keeps this order
    (pytest-xdist's --no-loadscope-reorder)."""
    items[:] = start_order(items)


REPO = Path(__file__).resolve().parents[1]
# One ready job per kind, as producers send them (examples/README.md).
EXAMPLES = REPO / "examples"
# What the reference systems answer for those jobs (tests/data/reference/README.md).
REFERENCE = Path(__file__).resolve().parent / "data" / "reference"
REQUIRE_REDIS = bool(os.environ.get("CI") or os.environ.get("APPORTION_REQUIRE_REDIS"))


def load_example(name: str) -> Any:
    return json.loads((EXAMPLES / name).read_text())


def load_reference(name: str) -> Any:
    return json.loads((REFERENCE / name).read_text())


class Startable(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...


S = TypeVar("S", bound=Startable)


def running(server: S) -> Iterator[S]:
    """Start ``server`` (a redis-server, or a cluster of them) for the fixture that
    yields from this, and stop it after; a missing redis-server skips locally and fails
    in CI."""
    try:
        server.start()
    except FileNotFoundError:
        if REQUIRE_REDIS:
            pytest.fail("redis-server is not installed; CI must run the real-Redis tests")
        pytest.skip("redis-server is not installed (CI installs it)")
    try:
        yield server
    finally:  # also when the generator is closed early: never leave a redis-server behind
        server.stop()


def own_redis_server(
    workdir: Path, *, appendonly: bool = False, extra_args: tuple[str, ...] = ()
) -> Iterator[RedisServer]:
    """A dedicated redis-server on a free port (see :func:`running`)."""
    server = RedisServer(
        port=free_port(), workdir=workdir, appendonly=appendonly, extra_args=extra_args
    )
    yield from running(server)


# A Redis that refuses writes past its maxmemory instead of evicting keys, as the
# operations guide asks of a Redis that holds queues.
NO_EVICTION = ("--maxmemory-policy", "noeviction")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    yield from own_redis_server(tmp_path_factory.mktemp("redis"))


@pytest.fixture
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    """A clean database for each test."""
    client = redis_server.client()
    client.flushall()
    yield redis_server.url
    client.close()
