"""``apportion.engine.run``: one place turns outcomes into envelope statuses."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from pydantic import BaseModel

from apportion import kinds
from apportion.contracts.partition import PartitionJob
from apportion.engine import Context, run
from apportion.errors import Infeasible, Problem, Rejected
from apportion.kinds import UnknownKind
from apportion.limits import Limits

MINIMAL = {
    "schema": [{"id": "p", "type": "partition", "size": 10}],
    "hardware": {"disks": [{"id": "sda", "size": 100}]},
}


class Answer(BaseModel):
    answer: int


_solve: Any = None


def dispatch(job: Any, ctx: Context) -> Any:
    """The partition kind's engine while a test has installed its own."""
    return _solve(job, ctx)


def _install(monkeypatch: pytest.MonkeyPatch, solve: Any) -> None:
    monkeypatch.setitem(
        kinds.REGISTRY,
        "partition",
        replace(kinds.get("partition"), solver="tests.unit.test_engine_run:dispatch"),
    )
    monkeypatch.setattr(__import__(__name__, fromlist=["_solve"]), "_solve", solve)


def test_an_unknown_kind_is_a_caller_error_not_an_envelope() -> None:
    with pytest.raises(UnknownKind, match="unknown job kind"):
        run("horoscope", {})


def test_validation_errors_become_rejected_with_every_path() -> None:
    env = run("partition", {"schema": [{"type": "lv"}], "hardware": {}})

    assert env.status == "rejected"
    assert env.error is not None
    paths = {d.path for d in env.error.details}
    assert {"schema[0].id", "hardware.disks"} <= paths
    assert env.result is None


def test_rejected_and_infeasible_from_the_engine_map_to_their_statuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def rejecting(job: PartitionJob, ctx: Context) -> Answer:
        raise Rejected("bad size", [Problem("schema[0].size", "negative")])

    _install(monkeypatch, rejecting)
    env = run("partition", MINIMAL)
    assert env.status == "rejected"
    assert env.error is not None
    assert env.error.details[0].path == "schema[0].size"

    def infeasible(job: PartitionJob, ctx: Context) -> Answer:
        raise Infeasible("disk sda is 10 MiB short")

    _install(monkeypatch, infeasible)
    env = run("partition", MINIMAL)
    assert env.status == "infeasible"
    assert env.error is not None
    assert env.error.message == "disk sda is 10 MiB short"


def test_an_engine_crash_is_answered_without_a_stack_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def crashing(job: PartitionJob, ctx: Context) -> Answer:
        raise ZeroDivisionError("division by zero")

    _install(monkeypatch, crashing)
    env = run("partition", {**MINIMAL, "job_id": "j-1"})

    assert env.status == "rejected"
    assert env.error is not None
    assert env.error.code == "internal_error"
    assert "ZeroDivisionError" in env.error.message
    assert "Traceback" not in env.error.message
    assert env.job_id == "j-1"


def test_exceptions_the_caller_owns_pass_through(monkeypatch: pytest.MonkeyPatch) -> None:
    class Deadline(Exception):
        pass

    def slow(job: PartitionJob, ctx: Context) -> Answer:
        raise Deadline

    _install(monkeypatch, slow)
    with pytest.raises(Deadline):
        run("partition", MINIMAL, reraise=(Deadline,))


def test_ok_results_are_plain_json_and_carry_the_fallback_job_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _install(monkeypatch, lambda job, ctx: Answer(answer=42))
    env = run("partition", MINIMAL, job_id="task-7")

    assert env.status == "ok"
    assert env.result == {"answer": 42}
    assert env.job_id == "task-7"
    assert env.elapsed_ms >= 0


def test_json_text_with_nan_or_over_the_payload_limit_is_rejected() -> None:
    env = run("partition", '{"schema": NaN}')
    assert env.status == "rejected"
    assert env.error is not None
    assert "NaN" in env.error.message

    env = run("partition", "x" * 200, Context(limits=Limits(max_payload_bytes=100)))
    assert env.status == "rejected"
    assert env.error is not None
    assert env.error.code == "too_large"


def test_deeply_nested_json_text_is_rejected_not_a_recursion_crash() -> None:
    env = run("partition", "[" * 100_000 + "]" * 100_000)

    assert env.status == "rejected"
    assert env.error is not None
    assert env.error.details[0].path == "$"
