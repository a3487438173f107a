"""The kinds registry: every entry is complete, and the rest of apportion follows it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from apportion import kinds
from apportion.engine import run
from apportion.kinds import JobKind

ALL = list(kinds.REGISTRY.values())


@pytest.mark.parametrize("kind", ALL, ids=lambda k: k.name)
def test_every_kind_names_an_engine_and_an_explanation_that_exist(kind: JobKind) -> None:
    assert callable(kind.load_solver())
    assert kind.explain is not None
    assert callable(kinds.load(kind.explain))


@pytest.mark.parametrize("kind", ALL, ids=lambda k: k.name)
def test_every_kinds_demo_jobs_are_its_own_and_at_least_one_is_answered_ok(
    kind: JobKind,
) -> None:
    assert kind.demo_jobs is not None
    jobs = kinds.load(kind.demo_jobs)

    assert {job_kind for job_kind, _title, _job in jobs} == {kind.name}
    statuses = [run(kind.name, job).status for _kind, _title, job in jobs]
    assert "ok" in statuses


def test_the_builtin_kinds_keep_their_task_names_and_queues() -> None:
    routes = {k.task_name: k.queue for k in ALL}

    assert routes == {
        "apportion.auto_attach": "attach",
        "apportion.guest_host_attach": "attach",
        "apportion.heal_org": "attach",
        "apportion.launch_select": "launch",
        "apportion.partition": "partition",
        "apportion.launch_outcome": "events",
    }
    assert kinds.queues() == ("attach", "launch", "partition", "events")


def test_registering_a_different_kind_under_a_known_name_is_refused() -> None:
    clash = replace(kinds.get("partition"), queue="elsewhere")

    with pytest.raises(ValueError, match="already registered"):
        kinds.register(clash)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "Partition"}, "lower-case identifier"),
        ({"soft_time_limit": 90}, "below the hard limit"),
    ],
)
def test_a_malformed_entry_is_refused_when_it_is_declared(
    change: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        replace(kinds.get("partition"), **change)  # type: ignore[arg-type]


def test_an_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(kinds.UnknownKind, match="kinds are auto_attach, guest_host_attach"):
        kinds.get("horoscope")
