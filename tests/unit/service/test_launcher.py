"""The launcher hook: failed launches are recorded and selection retries elsewhere."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from apportion.contracts import Envelope
from apportion.engine import Context, run
from apportion.workers.history.failure_store import MemoryFailureStore
from apportion.workers.launch.launcher import SimulatedLauncher, launch_with_retries

NOW = datetime(2026, 11, 21, 22, 0, tzinfo=UTC)


def job(**extra: Any) -> dict[str, Any]:
    host = {"VCPU": {"total": 8}}
    return {
        "job_id": "launch-1",
        "providers": [{"uuid": f"{a}-h", "account": a, "inventories": host} for a in ("a", "b")],
        "request": "resources=VCPU:1",
        "accounts": {"a": {"priority": 2}, "b": {"priority": 1}},
        "policy": [
            {"module": "equal"},
            {"module": "failure_penalty"},
            {"module": "priority", "mode": "strict"},
        ],
        "seed": 7,
        **extra,
    }


def launch(
    payload: Mapping[str, Any],
    rates: Mapping[str, float],
    history: MemoryFailureStore,
    attempts: int = 3,
) -> Envelope:
    def ctx() -> Context:
        return Context(now=NOW, failure_counts=lambda accts, w: history.counts(accts, w, NOW))

    first = run("launch_select", dict(payload), ctx())
    return launch_with_retries(
        first,
        payload,
        launcher=SimulatedLauncher(rates),
        history=history,
        attempts=attempts,
        now=lambda: NOW,
        reselect=lambda again: run("launch_select", dict(again), ctx(), job_id=first.job_id),
    )


def test_a_failed_launch_is_recorded_and_the_next_account_is_tried() -> None:
    history = MemoryFailureStore()
    env = launch(job(), {"a": 1.0}, history)

    assert env.status == "ok"
    assert env.result is not None
    attempts = env.result["attempts"]
    assert [(t["account"], t["ok"]) for t in attempts] == [("a", False), ("b", True)]
    assert env.result["launched"] is True
    assert env.result["selection"]["account"] == "b"
    assert history.counts(["a", "b"], 6, NOW) == {"a": 1, "b": 0}
    assert [e["event_id"] for e in history.stream] == ["launch-1/launch-1"]


def test_a_redelivered_job_replays_its_attempts_without_recording_twice() -> None:
    history = MemoryFailureStore()
    first = launch(job(), {"a": 1.0}, history)
    again = launch(job(), {"a": 1.0}, history)

    assert first.result is not None
    assert again.result is not None
    replayed = [(t["account"], t["ok"]) for t in again.result["attempts"]]
    assert replayed == [(t["account"], t["ok"]) for t in first.result["attempts"]]
    assert history.counts(["a"], 6, NOW) == {"a": 1}
    assert len(history.stream) == 1


def test_when_every_account_fails_the_error_lists_each_attempt() -> None:
    history = MemoryFailureStore()
    env = launch(job(), {"a": 1.0, "b": 1.0}, history)

    assert env.status == "infeasible"
    assert env.error is not None
    details = {d.path: d.message for d in env.error.details}
    assert details["attempts[0]"].startswith("a: simulated launch failure")
    assert details["attempts[1]"].startswith("b: simulated launch failure")
    assert history.counts(["a", "b"], 6, NOW) == {"a": 1, "b": 1}


def test_attempts_stop_at_the_configured_number() -> None:
    history = MemoryFailureStore()
    env = launch(job(), {"a": 1.0, "b": 1.0}, history, attempts=1)

    assert env.status == "ok"
    assert env.result is not None
    assert len(env.result["attempts"]) == 1
    assert env.result["launched"] is False


def test_the_simulated_launcher_is_deterministic_per_job_and_attempt() -> None:
    launcher = SimulatedLauncher({"a": 0.5})
    outcomes = [launcher.launch(f"job-{i}", 1, "a", {}).ok for i in range(400)]

    assert outcomes == [launcher.launch(f"job-{i}", 1, "a", {}).ok for i in range(400)]
    assert 160 <= sum(outcomes) <= 240
    assert launcher.launch("job", 1, "never-fails", {}).ok
