"""The order in which the suite's files start (scripts/test runs them in several
processes, one file to a process at a time, in the order collected).

A file that runs for a minute or more (marked ``long``: a 120 s outage, a visibility
timeout, a fresh install) that starts late leaves every other process idle at the end,
waiting on it. So long files start first, then the files with a ``slow`` test (real
workers, restarts), then the rest: the longest jobs first, as a scheduler of unequal
jobs does. Within each group the collected order stays (pytest's, or a plugin's), and
a file's tests stay together and in their order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar


class Collected(Protocol):
    """What the order reads of a collected test (a ``pytest.Item``)."""

    @property
    def nodeid(self) -> str: ...

    def get_closest_marker(self, name: str) -> object | None: ...


T = TypeVar("T", bound=Collected)


def _file(item: Collected) -> str:
    return item.nodeid.split("::", 1)[0]


def start_order(items: Sequence[T]) -> list[T]:
    """``items`` with the files marked ``long`` first, then those with a ``slow`` test."""
    rank: dict[str, int] = {}
    for item in items:
        here = 0 if item.get_closest_marker("long") else 1 if item.get_closest_marker("slow") else 2
        rank[_file(item)] = min(here, rank.get(_file(item), 2))
    first_seen = {name: i for i, name in reversed(list(enumerate(map(_file, items))))}
    return sorted(items, key=lambda item: (rank[_file(item)], first_seen[_file(item)]))
