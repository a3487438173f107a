"""The prefork pool's watch on its children's exits (workers/prefork.py), on kombu's real
event loop hub. A pipe stands in for a child's exit sentinel, as it is one: the child
holds its write end, and its exit closes it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import click
import pytest
from celery import Celery
from celery.bin.worker import WorkersPool
from celery.concurrency.solo import TaskPool as SoloPool
from kombu.asynchronous import Hub

from apportion.config.celeryconfig import celery_config
from apportion.config.settings import Settings
from apportion.workers.prefork import AsynPool, TaskPool


@dataclass
class Child:
    """What the pool reads of a child process: its Popen's sentinel."""

    sentinel: int
    _popen: Any = field(init=False)

    def __post_init__(self) -> None:
        self._popen = SimpleNamespace(sentinel=self.sentinel)


@pytest.fixture
def hub() -> Iterator[Hub]:
    loop = Hub()
    yield loop
    loop.close()


@pytest.fixture
def sentinel() -> Iterator[tuple[int, int]]:
    """(read end, write end); the write end closed means the child exited."""
    read, write = os.pipe()
    yield read, write
    for fd in (read, write):
        with contextlib.suppress(OSError):  # the test closed it: the child exited
            os.close(fd)


@pytest.fixture
def pool() -> tuple[AsynPool, list[str]]:
    """The pool's watch alone (no processes): maintenance runs are recorded."""
    instance = AsynPool.__new__(AsynPool)
    maintained: list[str] = []
    instance.maintain_pool = lambda: maintained.append("maintain")
    return instance, maintained


def test_an_exit_read_while_this_childs_sentinel_is_silent_leaves_the_child_watched(
    hub: Hub, sentinel: tuple[int, int], pool: tuple[AsynPool, list[str]]
) -> None:
    # The readiness of another child's sentinel, whose descriptor number this child's
    # took over within the same turn of the event loop.
    watch, maintained = pool
    child = Child(sentinel[0])
    watch._track_child_process(child, hub)
    watched = child._sentinel_poll

    watch._event_process_exit(hub, child)

    assert child._sentinel_poll == watched
    assert hub.readers[watched] == (watch._event_process_exit, (hub, child))
    assert maintained == []


def test_a_childs_exit_is_still_seen_and_the_pool_maintained(
    hub: Hub, sentinel: tuple[int, int], pool: tuple[AsynPool, list[str]]
) -> None:
    watch, maintained = pool
    child = Child(sentinel[0])
    watch._track_child_process(child, hub)
    watched = child._sentinel_poll
    os.close(sentinel[1])

    watch._event_process_exit(hub, child)

    assert child._sentinel_poll is None
    assert watched not in hub.readers
    assert maintained == ["maintain"]


def test_a_child_whose_sentinel_was_forgotten_is_watched_again_when_the_pool_registers_again(
    hub: Hub, sentinel: tuple[int, int], pool: tuple[AsynPool, list[str]]
) -> None:
    # Celery's own pool hands None to the hub here: kombu raises ValueError("file
    # descriptor is None") and the worker exits.
    watch, maintained = pool
    child = Child(sentinel[0])
    child._sentinel_poll = None

    watch._track_child_process(child, hub)

    watched = child._sentinel_poll
    assert isinstance(watched, int)
    assert watched != sentinel[0]
    assert hub.readers[watched] == (watch._event_process_exit, (hub, child))
    os.close(sentinel[1])
    watch._event_process_exit(hub, child)
    assert child._sentinel_poll is None
    assert maintained == ["maintain"]


def test_a_joined_child_whose_sentinel_was_forgotten_is_left_to_the_pools_maintenance(
    hub: Hub, pool: tuple[AsynPool, list[str]]
) -> None:
    watch, _ = pool
    child = SimpleNamespace(_sentinel_poll=None, _popen=None)

    watch._track_child_process(child, hub)

    assert hub.readers == {}


def _pool_asked_for(name: str) -> Any:
    app = Celery("apportion", set_as_current=False)
    app.config_from_object(celery_config(Settings()))
    context = click.Context(click.Command("worker"), obj=SimpleNamespace(app=app))
    return WorkersPool().convert(name, None, context)


def test_a_worker_asked_for_the_prefork_pool_runs_this_one() -> None:
    # `--pool prefork` is Celery's default, and what tests/support/processes.py passes.
    assert _pool_asked_for("prefork") is TaskPool
    assert TaskPool.Pool is AsynPool


def test_a_worker_asked_for_another_pool_runs_that_one() -> None:
    assert _pool_asked_for("solo") is SoloPool
