"""The suite's own schedule: long files start first (tests/support/schedule.py)."""

from __future__ import annotations

from dataclasses import dataclass

from tests.support.schedule import start_order


@dataclass(frozen=True)
class Item:
    nodeid: str
    markers: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


def _ids(tests: list[Item]) -> list[str]:
    return [test.nodeid for test in tests]


def test_long_files_start_first_then_slow_ones_then_the_rest_in_collected_order() -> None:
    collected = [
        Item("tests/unit/test_a.py::test_one"),
        Item("tests/integration/test_b.py::test_slow", ("slow",)),
        Item("tests/unit/test_c.py::test_two"),
        Item("tests/integration/test_d.py::test_outage", ("slow", "long")),
        Item("tests/unit/test_a.py::test_three"),
    ]

    assert _ids(start_order(collected)) == [
        "tests/integration/test_d.py::test_outage",
        "tests/integration/test_b.py::test_slow",
        "tests/unit/test_a.py::test_one",
        "tests/unit/test_a.py::test_three",
        "tests/unit/test_c.py::test_two",
    ]


def test_a_files_tests_stay_together_and_in_order_when_one_of_them_is_slow() -> None:
    collected = [
        Item("tests/unit/test_e.py::test_quick"),
        Item("tests/integration/test_f.py::test_first"),
        Item("tests/unit/test_e.py::test_restart", ("slow",)),
        Item("tests/integration/test_f.py::test_second"),
    ]

    assert _ids(start_order(collected)) == [
        "tests/unit/test_e.py::test_quick",
        "tests/unit/test_e.py::test_restart",
        "tests/integration/test_f.py::test_first",
        "tests/integration/test_f.py::test_second",
    ]
