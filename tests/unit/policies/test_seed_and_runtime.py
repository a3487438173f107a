"""Seeding the default at worker boot, the worker's per-job lookup, the YAML forms, and
the store's bounded history as an invariant."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import fakeredis
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.config.settings import Settings
from apportion.engine import run
from apportion.errors import Rejected
from apportion.limits import Limits
from apportion.workers.history.failure_store import MemoryFailureStore
from apportion.workers.policies.seed import seed_default_policy
from apportion.workers.policies.store import PolicyStore
from apportion.workers.policies.text import policy_yaml, read_policy_yaml
from apportion.workers.runtime import Runtime

# ---- seeding ------------------------------------------------------------------------


@pytest.mark.redis
def test_the_default_policy_file_seeds_version_one_once(redis_url: str, tmp_path: Path) -> None:
    file = tmp_path / "policy.yaml"
    file.write_text("- module: equal\n- module: cost\n  mode: probabilistic\n")
    config = Settings(redis_url=redis_url, default_policy_file=str(file))

    first = seed_default_policy(config)
    file.write_text("- module: least_used\n")
    second = seed_default_policy(Settings(redis_url=redis_url, default_policy_file=str(file)))

    assert first is not None
    assert (first.pool, first.version) == ("default", 1)
    assert first.policy == [{"module": "equal"}, {"module": "cost", "mode": "probabilistic"}]
    assert second is None


@pytest.mark.redis
def test_a_default_policy_file_the_store_refuses_stops_the_worker(
    redis_url: str, tmp_path: Path
) -> None:
    file = tmp_path / "policy.yaml"
    file.write_text("- module: equal\n- module: failure_penalty\n  percnt: 5\n")

    with pytest.raises(ValueError, match=r"policy\[1\]\.percnt"):
        seed_default_policy(Settings(redis_url=redis_url, default_policy_file=str(file)))


def test_an_unreachable_store_at_boot_is_logged_and_the_worker_starts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = Settings(redis_url="redis://127.0.0.1:1/0")

    with caplog.at_level(logging.WARNING, "apportion.workers.policies"):
        assert seed_default_policy(config) is None

    assert "the default policy was not seeded" in caplog.text


def test_without_a_default_policy_file_nothing_is_seeded(tmp_path: Path) -> None:
    missing = tmp_path / "none.yaml"
    config = Settings(redis_url="redis://127.0.0.1:1/0", default_policy_file=str(missing))

    assert seed_default_policy(config) is None


# ---- the worker's lookup ------------------------------------------------------------


def small_job(pool: str) -> dict[str, Any]:
    host = {"VCPU": {"total": 8}}
    return {
        "providers": [{"uuid": f"{a}-h", "account": a, "inventories": host} for a in "ab"],
        "request": "resources=VCPU:1",
        "pool": pool,
        "seed": 1,
    }


def test_each_job_reads_the_current_version_so_a_save_decides_the_next_job() -> None:
    client = fakeredis.FakeRedis()
    store = PolicyStore(client)
    runtime = Runtime(
        settings=Settings(),
        publisher=None,  # type: ignore[arg-type]
        failures=MemoryFailureStore(),
        policies=store,
    )
    store.save("gpu", [{"module": "equal"}], author="a")

    first = run("launch_select", small_job("gpu"), runtime.context())
    store.save("gpu", [{"module": "least_used"}], author="a")
    second = run("launch_select", small_job("gpu"), runtime.context())

    assert first.result is not None
    assert second.result is not None
    assert first.result["policy"] == {"source": "pool", "pool": "gpu", "version": 1}
    assert second.result["policy"] == {"source": "pool", "pool": "gpu", "version": 2}


def test_a_worker_without_a_store_answers_from_the_default_policy_file() -> None:
    runtime = Runtime(
        settings=Settings(),
        publisher=None,  # type: ignore[arg-type]
        failures=MemoryFailureStore(),
    )

    env = run("launch_select", small_job("gpu"), runtime.context())

    assert env.result is not None
    assert env.result["policy"] == {"source": "file", "pool": None, "version": None}


def test_the_worker_context_carries_the_inline_policy_setting() -> None:
    runtime = Runtime(
        settings=Settings(allow_inline_policy=False),
        publisher=None,  # type: ignore[arg-type]
        failures=MemoryFailureStore(),
    )

    env = run("launch_select", {**small_job("gpu"), "policy": [{"module": "equal"}]},
              runtime.context())  # fmt: skip

    assert env.error is not None
    assert env.error.code == "inline_policy_disabled"


def test_the_worker_context_carries_the_settings_limits_and_the_failure_history() -> None:
    limits = Limits(max_json_items=1234)
    asked: list[tuple[list[str], float, Any]] = []

    class History(MemoryFailureStore):
        def counts(self, accounts: Any, window_hours: float, now: Any) -> dict[str, int]:
            asked.append((list(accounts), window_hours, now))
            return {"acct-1": 3}

    runtime = Runtime(
        settings=Settings(limits=limits),
        publisher=None,  # type: ignore[arg-type]
        failures=History(),
    )

    context = runtime.context()

    assert context.limits == limits
    assert context.policy_lookup is None  # no store: the default policy file decides
    assert context.default_policy is not None
    assert context.record_outcome is not None
    assert context.failure_counts is not None
    assert context.failure_counts(["acct-1"], 24.0) == {"acct-1": 3}
    assert asked == [(["acct-1"], 24.0, context.now)]  # the job's one clock reading


# ---- YAML forms ---------------------------------------------------------------------


def test_yaml_reads_a_list_a_policy_mapping_or_json_alike() -> None:
    expected = [{"module": "equal"}, {"module": "cost", "amount": 1.5}]

    assert read_policy_yaml("- module: equal\n- {module: cost, amount: 1.5}\n", max_chars=999) == (
        expected
    )
    assert read_policy_yaml("policy:\n  - module: equal\n  - {module: cost, amount: 1.5}\n",
                            max_chars=999) == expected  # fmt: skip
    assert read_policy_yaml('[{"module": "equal"}, {"module": "cost", "amount": 1.5}]',
                            max_chars=999) == expected  # fmt: skip
    assert read_policy_yaml(policy_yaml(expected), max_chars=999) == expected


def test_yaml_longer_than_its_limit_is_refused_before_it_is_parsed() -> None:
    with pytest.raises(Rejected) as caught:
        read_policy_yaml("- module: equal\n" * 100, max_chars=1000)

    assert caught.value.code == "too_large"


def test_yaml_aliases_are_refused_so_a_short_file_cannot_expand() -> None:
    bomb = "a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\npolicy: [*b, *b]\n"

    with pytest.raises(Rejected, match="aliases"):
        read_policy_yaml(bomb, max_chars=1000)


# ---- bounded history, as an invariant -----------------------------------------------


@settings(max_examples=30, deadline=None)
@given(saves=st.integers(1, 30), bound=st.integers(1, 10), pool=st.from_regex(
    r"\A[A-Za-z0-9][A-Za-z0-9_.:-]{0,20}\Z"))  # fmt: skip
def test_history_is_always_the_newest_versions_up_to_the_bound_newest_first(
    saves: int, bound: int, pool: str
) -> None:
    store = PolicyStore(fakeredis.FakeRedis(), max_versions=bound)
    for n in range(saves):
        store.save(pool, [{"module": "equal"}, {"module": "cost", "amount": n}], author="a")

    history = store.history(pool)

    expected = list(range(saves, max(0, saves - bound), -1))
    assert [v.version for v in history] == expected
    assert [v.policy[1]["amount"] for v in history] == [n - 1 for n in expected]
    assert store.kept(pool) == range(expected[-1], saves + 1)
    assert store.pools() == [pool]


def test_a_job_the_launcher_reruns_keeps_the_version_its_first_run_read() -> None:
    from types import SimpleNamespace

    from apportion import kinds
    from apportion.tasks.jobs import _solve
    from apportion.workers.launch.launcher import LaunchOutcome

    store = PolicyStore(fakeredis.FakeRedis())
    store.save("gpu", [{"module": "equal"}], author="a")

    class SavingLauncher:
        """Every launch fails, and an administrator saves a new version meanwhile."""

        def launch(self, job_id: str, attempt: int, account: str, request: Any) -> LaunchOutcome:
            store.save("gpu", [{"module": "least_used"}], author="b")
            return LaunchOutcome(False, "no capacity")

    runtime = Runtime(
        settings=Settings(launch_attempts=2),
        publisher=None,  # type: ignore[arg-type]
        failures=MemoryFailureStore(),
        launcher=SavingLauncher(),
        policies=store,
    )
    task = SimpleNamespace(request=SimpleNamespace(id="task-1"))

    env = _solve(task, kinds.get("launch_select"), small_job("gpu"), runtime, "task-1")  # type: ignore[arg-type]

    assert env.result is not None
    assert [a["ok"] for a in env.result["attempts"]] == [False, False]
    assert env.result["policy"] == {"source": "pool", "pool": "gpu", "version": 1}
    assert [s["module"] for s in env.result["selection"]["trace"]] == ["equal"]
    assert store.current("gpu").version == 3  # type: ignore[union-attr]
