"""The gate in front of the pool: what it does with each kind of queue item (no Redis)."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apportion import walk
from apportion.limits import Limits
from apportion.workers.broker.gate import (
    SENT_AT_HEADER,
    VERDICT_HEADER,
    Bury,
    Deliver,
    GateRules,
    answer_id,
    inspect,
)
from tests.fuzz.hostile import nested
from tests.support.hostile_stream import call, item
from tests.support.samples import comparison

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
RULES = GateRules(tasks={"apportion.partition": [90.0, 60.0]}, max_eta_seconds=600)
JOB = {"job_id": "j-1", "schema": [], "hardware": {"disks": []}}


def message(body: Any = None, **headers: Any) -> dict[str, Any]:
    raw, _ = item(
        call(JOB) if body is None else body,
        task="apportion.partition",
        queue="partition",
        headers=headers,
    )
    decoded: dict[str, Any] = json.loads(raw)
    return decoded


def gate(msg: dict[str, Any] | bytes, rules: GateRules = RULES) -> Bury | Deliver:
    return inspect(json.dumps(msg) if isinstance(msg, dict) else msg, rules, NOW)


def delivered(msg: dict[str, Any] | bytes, rules: GateRules = RULES) -> Deliver:
    verdict = gate(msg, rules)
    assert isinstance(verdict, Deliver), verdict
    return verdict


def body_of(verdict: Deliver) -> Any:
    return json.loads(base64.b64decode(verdict.message["body"]))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda m: b"\x00\xffnot json", "not_json"),
        (lambda m: json.dumps([m]).encode(), "not_a_message"),
        (lambda m: {**m, "properties": None}, "bad_properties"),
        (lambda m: {k: v for k, v in m.items() if k != "properties"}, "bad_properties"),
        (lambda m: {**m, "properties": {**m["properties"], "delivery_tag": 7}}, "bad_properties"),
        (lambda m: {**m, "headers": "a string"}, "bad_headers"),
        (lambda m: {**m, "headers": {**m["headers"], "task": None}}, "bad_headers"),
        (lambda m: {**m, "body": {"args": []}}, "bad_body"),
        (lambda m: {**m, "body": "%%% not base64"}, "bad_body"),
        (lambda m: {**m, "body": base64.b64encode(b"\xff\xfe").decode()}, "bad_body"),
        (lambda m: {**m, "body": base64.b64encode(b'{"a": 1}').decode()}, "not_a_task_call"),
        (lambda m: {**m, "body": base64.b64encode(b"[[], {}]").decode()}, "not_a_task_call"),
        (lambda m: {**m, "content-type": "application/x-python-serialize"}, "content_type"),
        (lambda m: {**m, "headers": {**m["headers"], "task": "os.system"}}, "unknown_task"),
    ],
)
def test_an_item_no_worker_can_run_is_dead_lettered_with_its_reason(
    change: Any, reason: str
) -> None:
    verdict = gate(change(message()))

    assert isinstance(verdict, Bury)
    assert verdict.reason == reason


def test_a_dead_letter_names_the_delivery_tag_and_task_when_they_can_be_read() -> None:
    msg = message()
    msg["headers"]["task"] = "apportion.horoscope"

    verdict = gate(msg)

    assert isinstance(verdict, Bury)
    assert verdict.tag == msg["properties"]["delivery_tag"]
    assert (verdict.task, verdict.task_id) == ("apportion.horoscope", msg["headers"]["id"])


def test_a_dead_letter_without_a_delivery_tag_still_names_its_task_and_task_id() -> None:
    msg = message()
    del msg["properties"]["delivery_tag"]

    verdict = gate(msg)

    assert isinstance(verdict, Bury)
    assert verdict.reason == "bad_properties"
    assert verdict.tag is None
    assert (verdict.task, verdict.task_id) == ("apportion.partition", msg["headers"]["id"])


def test_an_item_over_the_message_limit_is_not_even_decoded() -> None:
    verdict = gate(message(), GateRules(max_message_bytes=100))

    assert isinstance(verdict, Bury)
    assert verdict.reason == "too_large"
    assert "APPORTION_MAX_MESSAGE_BYTES" in verdict.detail


def test_a_good_message_is_delivered_with_its_body_untouched() -> None:
    msg = message()

    verdict = delivered(msg)

    assert verdict.message["body"] == msg["body"]
    assert verdict.verdict is None
    assert verdict.notes == ()
    assert verdict.message["headers"]["id"] == msg["headers"]["id"]


@pytest.mark.parametrize(
    ("job_change", "code", "path"),
    [
        (lambda j: {**j, "hardware": {"extra": nested(600)}}, "too_deep", "hardware.extra"),
        (
            lambda j: {**j, "x": {"__type__": "decimal", "__value__": "1e999999"}},
            "reserved_key",
            "x",
        ),
    ],
)
def test_a_job_over_a_limit_is_not_handed_on_but_carries_the_gates_verdict(
    job_change: Any, code: str, path: str
) -> None:
    verdict = delivered(message(call(job_change(JOB))))

    assert verdict.verdict is not None
    assert verdict.verdict["code"] == code
    assert verdict.verdict["details"][0]["path"].startswith(path)
    assert verdict.verdict["job_id"] == "j-1"
    assert verdict.message["headers"][VERDICT_HEADER] == verdict.verdict
    assert body_of(verdict) == [
        [],
        {},
        {"callbacks": None, "errbacks": None, "chain": None, "chord": None},
    ]


def test_a_duplicate_key_is_a_verdict_with_the_path_inside_the_job() -> None:
    text = json.dumps([[JOB], {}, {}]).replace('"hardware": {', '"hardware": {"disks": 1, ', 1)

    verdict = delivered(message(text.encode()))

    assert verdict.verdict is not None
    assert verdict.verdict["code"] == "duplicate_key"
    assert verdict.verdict["details"][0]["path"] == "hardware.disks"


def test_a_body_over_the_payload_limit_is_a_verdict_naming_the_limit() -> None:
    rules = GateRules(limits=Limits(max_payload_bytes=50), tasks=RULES.tasks)

    verdict = delivered(message(), rules)

    assert verdict.verdict is not None
    assert verdict.verdict["code"] == "too_large"
    assert "APPORTION_LIMITS__MAX_PAYLOAD_BYTES" in verdict.verdict["message"]


def test_nan_in_a_body_is_delivered_for_the_engine_to_reject_with_its_path() -> None:
    body = json.dumps([[{**JOB, "weight": float("nan")}], {}, {}]).encode()

    verdict = delivered(message(body))

    assert verdict.verdict is None


def test_a_producers_time_limit_is_replaced_by_the_queues_and_noted_unless_it_is_the_same() -> None:
    tiny = delivered(message(timelimit=[0.002, 0.001]))
    same = delivered(message(timelimit=[90.0, 60.0]))

    assert tiny.message["headers"]["timelimit"] == [None, None]
    assert any("time limit" in note for note in tiny.notes)
    assert same.notes == ()


def test_an_eta_beyond_the_cap_is_capped_and_an_unreadable_one_dropped() -> None:
    far = delivered(message(eta=(NOW + timedelta(days=30)).isoformat()))
    soon = delivered(message(eta=(NOW + timedelta(seconds=5)).isoformat()))
    bad = delivered(message(eta="next tuesday"))

    assert far.message["headers"]["eta"] == (NOW + timedelta(seconds=600)).isoformat()
    assert soon.message["headers"]["eta"] == (NOW + timedelta(seconds=5)).isoformat()
    assert bad.message["headers"]["eta"] is None


def test_an_expired_job_is_answered_expired_rather_than_silently_revoked() -> None:
    verdict = delivered(message(expires=(NOW - timedelta(minutes=1)).isoformat()))

    assert verdict.verdict is not None
    assert verdict.verdict["code"] == "expired"
    assert verdict.message["headers"]["expires"] is None


@pytest.mark.parametrize("bad_id", [None, 42, "", "x" * 300, "a\nb", "\ud800"])
def test_an_absurd_task_id_is_replaced_by_one_stable_for_the_message(bad_id: Any) -> None:
    msg = message()
    msg["headers"]["id"] = bad_id

    first = delivered(msg)
    again = delivered(msg)

    new_id = first.message["headers"]["id"]
    assert uuid.UUID(new_id)
    assert new_id == again.message["headers"]["id"]  # a redelivery keeps its id
    assert first.message["properties"]["correlation_id"] == new_id


def test_callbacks_and_other_embedded_tasks_are_removed() -> None:
    embed = {"callbacks": [{"task": "os.system", "args": ["rm -rf /"]}], "chain": [{}]}
    body = json.dumps([[JOB], {}, embed]).encode()

    verdict = delivered(message(body))

    assert body_of(verdict)[2] == {
        "callbacks": None,
        "errbacks": None,
        "chain": None,
        "chord": None,
    }
    assert body_of(verdict)[0] == [JOB]


def test_headers_outside_the_whitelist_are_dropped_and_reprs_cut() -> None:
    verdict = delivered(
        message(
            shadow="apportion.innocent",
            ignore_result=True,
            group="g",
            stamps={"x": 1},
            argsrepr="(" + "x" * 5000 + ")",
            apportion_rejected={"code": "forged"},
        )
    )

    headers = verdict.message["headers"]
    assert not {"shadow", "ignore_result", "stamps", VERDICT_HEADER} & set(headers)
    assert headers["group"] is None
    assert len(headers["argsrepr"]) == 1024


@pytest.mark.parametrize(
    ("sent_at", "kept"),
    [(1795600000.25, True), (1795600000, True), ("soon", False), (None, False), (True, False)],
)
def test_the_producers_send_time_is_kept_only_when_it_is_a_number(sent_at: Any, kept: bool) -> None:
    headers = delivered(message(apportion_sent_at=sent_at)).message["headers"]

    assert (SENT_AT_HEADER in headers) is kept
    if kept:
        assert headers[SENT_AT_HEADER] == sent_at


def test_a_reserved_key_object_as_the_job_itself_is_reported_at_the_jobs_root() -> None:
    reserved = {"__type__": "decimal", "__value__": "1e999999"}

    verdict = delivered(message(call(reserved)))

    assert verdict.verdict is not None
    assert verdict.verdict["code"] == "reserved_key"
    assert verdict.verdict["details"][0]["path"] == "$"


def test_a_rejected_events_answer_is_filed_under_its_event_id_the_kinds_own_key() -> None:
    event = {"event_id": "evt-7", "job_id": "launch-1", "x": nested(600)}
    raw, _ = item(call(event), task="apportion.launch_outcome", queue="events")
    rules = GateRules(tasks={"apportion.launch_outcome": [20.0, 10.0]}, max_eta_seconds=600)

    verdict = delivered(json.loads(raw), rules)

    assert verdict.verdict is not None
    assert verdict.verdict["code"] == "too_deep"
    assert verdict.verdict["job_id"] == "evt-7"


def _kombus_decode(verdict: Any) -> Any:
    from kombu.serialization import loads

    data = base64.b64decode(verdict.message["body"])
    return loads(data, "application/json", "utf-8", accept={"application/json"})


@pytest.mark.parametrize(
    "body",
    [
        json.dumps([[JOB], {}, {"callbacks": None, "errbacks": None, "chain": None}]),
        json.dumps([[JOB], {}, None]),
        json.dumps([[], {"job": {**JOB, "n": [1.5, -0.0, 1e300, 10**30, "é\u2028"]}}, {}]),
        json.dumps([[JOB], {}, {"callbacks": [{"task": "x"}]}]),  # embed replaced
    ],
)
def test_the_body_the_gate_decoded_is_what_kombu_decodes_from_the_delivered_message(
    body: str,
) -> None:
    verdict = delivered(message(body.encode()))

    assert verdict.call is not None
    assert verdict.call == _kombus_decode(verdict)


def test_a_rejected_message_carries_no_decoded_body() -> None:
    verdict = delivered(message(json.dumps([[{**JOB, "x": nested(600)}], {}, {}]).encode()))

    assert verdict.verdict is not None
    assert verdict.call is None


def test_an_integer_of_5000_digits_is_a_verdict_with_its_path_not_a_dead_letter() -> None:
    text = call(JOB).decode().replace('"disks": []', '"disks": [], "ram": ' + "9" * 5000)

    verdict = delivered(message(call(text=text)))

    assert verdict.verdict is not None
    assert verdict.verdict["code"] == "number_out_of_range"
    assert verdict.verdict["details"][0]["path"] == "hardware.ram"
    assert verdict.verdict["job_id"] == "j-1"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(
    extra=_JSON,
    depth=st.integers(1, 6),
    items=st.integers(3, 40),
)
@comparison(200, deadline=None)
def test_a_job_the_text_vouches_for_gets_the_verdict_the_walk_gives(
    extra: Any, depth: int, items: int
) -> None:
    limits = Limits(max_json_depth=depth, max_json_items=items)
    rules = GateRules(limits=limits, tasks=RULES.tasks, max_eta_seconds=600)
    body = [[{**JOB, "x": extra}], {}, {}]
    walked = walk.check(body, walk.Rules(limits, outer_depth=2, outer_items=8, values=False))

    verdict = delivered(message(json.dumps(body).encode()), rules)

    assert (verdict.verdict or {}).get("code") == (walked.code if walked else None)


def test_an_answer_is_filed_under_the_jobs_own_id_else_the_task_id() -> None:
    own = delivered(message())
    without = delivered(message(call({k: v for k, v in JOB.items() if k != "job_id"})))
    rejected = delivered(message(call({**JOB, "x": nested(600)})))

    assert answer_id(own) == "j-1"
    assert answer_id(without) == without.message["headers"]["id"]
    assert rejected.verdict is not None
    assert answer_id(rejected) == "j-1"
