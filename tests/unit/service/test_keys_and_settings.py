"""Key names, settings and the Celery configuration derived from them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pydantic import ValidationError

from apportion import kinds
from apportion.config.celeryconfig import celery_config
from apportion.config.settings import Settings
from apportion.workers.app import create_app
from apportion.workers.redis.keys import Keys


def test_every_key_apportion_writes_is_under_its_prefix() -> None:
    keys = Keys("acme")

    names = [
        *keys.all_results_streams(),
        keys.published_marker("partition", "j"),
        keys.launch_failures_stream,
        keys.failure_history("vsphere-a"),
        keys.failure_event_marker("evt-1"),
    ]

    assert all(n.startswith("acme:") for n in names)
    assert len(set(names)) == len(names)
    assert keys.results_stream("partition") == "acme:results:partition"


def test_settings_default_to_the_local_redis_and_read_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings().redis_url == "redis://127.0.0.1:6379/0"

    monkeypatch.setenv("APPORTION_REDIS_URL", "redis://cache:6380/2")
    monkeypatch.setenv("APPORTION_VISIBILITY_TIMEOUT", "7200")
    monkeypatch.setenv("APPORTION_LIMITS__MAX_POOLS", "123")
    monkeypatch.setenv("APPORTION_TIME_LIMITS__PARTITION__HARD", "300")
    s = Settings()

    assert s.broker == "redis://cache:6380/2"
    assert s.backend == "redis://cache:6380/2"
    assert s.visibility_timeout == 7200
    assert s.limits.max_pools == 123
    partition = kinds.get("partition")
    assert s.time_limit(partition).hard == 300
    assert s.time_limit(partition).soft == 60  # the kind's default, kept


def test_a_visibility_timeout_not_longer_than_the_longest_hard_limit_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("APPORTION_VISIBILITY_TIMEOUT", "90")

    with pytest.raises(ValidationError, match="longer than the longest hard time limit"):
        Settings()


def test_a_stream_max_age_not_longer_than_the_visibility_timeout_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("APPORTION_VISIBILITY_TIMEOUT", "7200")
    monkeypatch.setenv("APPORTION_STREAM_MAX_AGE", "3600")

    with pytest.raises(
        ValidationError,
        match="APPORTION_STREAM_MAX_AGE=3600 must be longer than APPORTION_VISIBILITY_TIMEOUT=7200",
    ):
        Settings()

    monkeypatch.setenv("APPORTION_STREAM_MAX_AGE", "7201")
    assert Settings().stream_max_age == 7201


def test_a_soft_limit_must_come_before_the_hard_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPORTION_TIME_LIMITS__LAUNCH__SOFT", "50")

    with pytest.raises(ValidationError, match="soft time limit"):
        Settings()


def test_the_celery_configuration_accepts_json_only_and_acks_late() -> None:
    conf = celery_config(Settings())

    assert conf["accept_content"] == ["json"]
    assert conf["result_accept_content"] == ["json"]
    assert conf["task_serializer"] == conf["result_serializer"] == "json"
    assert conf["task_acks_late"] is True
    assert conf["task_reject_on_worker_lost"] is True
    assert conf["worker_prefetch_multiplier"] == 1
    assert conf["result_expires"] == 86_400


def test_workers_send_task_events_only_when_a_monitor_asks_for_them() -> None:
    # Flower switches them on by remote control (apportion.workers.flower, every 5 s);
    # `apportion worker -E` keeps them on.
    conf = celery_config(Settings())

    assert conf["worker_send_task_events"] is False
    assert conf["task_send_sent_event"] is False
    assert conf["task_track_started"] is False


def test_the_visibility_timeout_is_set_everywhere_celery_reads_it() -> None:
    conf = celery_config(Settings(visibility_timeout=5000))

    assert conf["broker_transport_options"]["visibility_timeout"] == 5000
    assert conf["result_backend_transport_options"]["visibility_timeout"] == 5000
    assert conf["visibility_timeout"] == 5000


def test_each_task_gets_its_queue_and_that_queues_time_limits() -> None:
    conf = celery_config(Settings())

    assert conf["task_routes"]["apportion.auto_attach"]["queue"] == "attach"
    assert conf["task_routes"]["apportion.guest_host_attach"]["queue"] == "attach"
    assert conf["task_routes"]["apportion.launch_select"]["queue"] == "launch"
    assert conf["task_routes"]["apportion.partition"]["queue"] == "partition"
    assert conf["task_routes"]["apportion.launch_outcome"]["queue"] == "events"
    assert {route["queue"] for route in conf["task_routes"].values()} == {
        q.name for q in conf["task_queues"]
    }
    app = create_app(Settings(), broker="memory://", backend="cache+memory://")
    launch = app.tasks["apportion.launch_select"]
    assert (launch.soft_time_limit, launch.time_limit) == (30, 45)
    attach = app.tasks["apportion.guest_host_attach"]
    assert (attach.soft_time_limit, attach.time_limit) == (60, 90)


def test_an_operators_time_limit_for_a_queue_reaches_every_task_on_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("APPORTION_TIME_LIMITS__ATTACH__SOFT", "5")
    app = create_app(Settings(), broker="memory://", backend="cache+memory://")

    for name in ("apportion.auto_attach", "apportion.guest_host_attach"):
        assert (app.tasks[name].soft_time_limit, app.tasks[name].time_limit) == (5, 90)


def test_time_limits_for_a_queue_no_kind_runs_on_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("APPORTION_TIME_LIMITS__PARTITON__HARD", "300")

    with pytest.raises(ValidationError, match="unknown queue"):
        Settings()


def test_two_kinds_on_one_queue_keep_their_own_time_limits_until_the_operator_sets_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    quick = replace(kinds.get("guest_host_attach"), soft_time_limit=5, time_limit=8)
    monkeypatch.setitem(kinds.REGISTRY, "guest_host_attach", quick)

    app = create_app(Settings(), broker="memory://", backend="cache+memory://")
    assert (
        app.tasks["apportion.guest_host_attach"].soft_time_limit,
        app.tasks["apportion.guest_host_attach"].time_limit,
    ) == (5, 8)
    assert (
        app.tasks["apportion.auto_attach"].soft_time_limit,
        app.tasks["apportion.auto_attach"].time_limit,
    ) == (60, 90)

    monkeypatch.setenv("APPORTION_TIME_LIMITS__ATTACH__HARD", "120")
    settings = Settings()
    assert settings.time_limit(quick).hard == 120
    assert settings.time_limit(kinds.get("auto_attach")).hard == 120
