"""What a producer puts in a job message besides the job: the preview Flower shows."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kombu import Exchange, Queue, serialization

from apportion.config.settings import Settings
from apportion.workers.producer import (
    PLAIN_SERIALIZER,
    PREVIEW_MAX,
    JobSender,
    args_preview,
    producer_app,
)


def test_the_preview_shows_a_jobs_top_level_with_containers_by_their_size() -> None:
    job = {
        "job_id": "p-1",
        "schema": [{"id": "os"}, {"id": "root"}, {"id": "swap"}],
        "hardware": {"ram": 1024, "disks": []},
        "seed": 7,
        "explain": False,
        "note": None,
    }

    assert args_preview(job) == (
        '[{"job_id":"p-1","schema":"[3 items]","hardware":"{2 keys}",'
        '"seed":7,"explain":false,"note":null}]'
    )


def test_a_long_string_is_shown_by_its_first_63_characters() -> None:
    preview = json.loads(args_preview({"job_id": "j" * 200}))

    assert preview == [{"job_id": "j" * 63 + "…"}]


def test_a_preview_never_exceeds_celerys_1024_characters_however_wide_the_job() -> None:
    job = {f"key{i}": "v" * 60 for i in range(500)}

    preview = args_preview(job)

    assert len(preview) == PREVIEW_MAX == 1024
    assert preview.endswith("…")
    assert preview.startswith('[{"key0":"' + "v" * 60)


@pytest.mark.parametrize(
    ("job", "shown"),
    [
        ([1, 2, 3], '["[3 items]"]'),
        ("text", '["text"]'),
        (None, "[null]"),
        ({1: "integer key"}, '[{"1":"integer key"}]'),
        ({"when": {1, 2}}, "[<dict>]"),  # not JSON data: the producer's own error is Celery's
    ],
)
def test_anything_else_a_caller_sends_is_previewed_without_raising(job: Any, shown: str) -> None:
    assert args_preview(job) == shown


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@given(st.dictionaries(st.text(max_size=80), _json, max_size=40))
def test_every_json_jobs_preview_is_bounded_and_names_each_shown_key(job: dict[str, Any]) -> None:
    preview = args_preview(job)

    assert len(preview) <= PREVIEW_MAX
    if len(preview) < PREVIEW_MAX:
        assert list(json.loads(preview)[0]) == list(job)


def test_an_integer_beyond_64_bits_is_shown_by_its_digits() -> None:
    assert args_preview({"job_id": "big", "seed": 2**70}) == (
        '[{"job_id":"big","seed":"1180591620717411303424"}]'
    )


def test_queue_declaration_is_left_out_only_when_every_queue_is_on_a_direct_exchange() -> None:
    ours = producer_app(Settings(redis_url="redis://127.0.0.1:1/0"))
    topic = producer_app(Settings(redis_url="redis://127.0.0.1:1/0"))
    topic.conf.task_queues = [Queue("partition", Exchange("jobs", type="topic"), "partition.#")]

    assert JobSender(ours).declare == ()
    assert JobSender(topic).declare is None


def test_a_sender_refuses_to_hold_a_second_producer() -> None:
    app = producer_app(Settings(redis_url="redis://127.0.0.1:1/0"))
    app.conf.broker_url = "memory://"  # a producer without a Redis to reach
    sender = JobSender(app)

    with sender, pytest.raises(RuntimeError, match="already holds"):
        sender.__enter__()
    assert sender.producer is None


@pytest.mark.parametrize(
    "data",
    [
        ([{"size": float("nan")}], {}, {}),
        ([datetime(2026, 12, 8, tzinfo=UTC)], {}, {}),
        ({"ok": True, "reply": [1, 2]},),
    ],
)
def test_the_plain_serializer_writes_anything_but_a_plain_call_as_kombus_json_does(
    data: Any,
) -> None:
    assert serialization.dumps(data, PLAIN_SERIALIZER) == serialization.dumps(data, "json")
