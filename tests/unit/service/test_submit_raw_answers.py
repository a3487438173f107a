"""``apportion submit --wait`` prints an answer as its result record holds it only where
decoding and printing it would have written the very same bytes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kombu.utils import json as kombu_json

from apportion.codec import encode
from apportion.workers.results import fast_json
from apportion.workers.results.celery_result import success_value
from apportion.workers.submit import RawEnvelope, _loads_record, printable

WHEN = datetime(2026, 12, 7, 19, 30, 0, 123456, tzinfo=UTC)

scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too: the codec's fallback writes those
    | st.floats()  # NaN, infinities, 1e-05: written differently by the fallback
    | st.text()
    | st.sampled_from(["é", "\x7f", "\x01", "a\\u00e9", '"__type__"', '", "', "e-0"])
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
        | st.dictionaries(st.integers(), inner, min_size=1, max_size=2)
    ),  # the fallback's keys
    max_leaves=20,
)
envelopes = st.fixed_dictionaries(
    {
        "job_id": st.none() | st.text(max_size=8),
        "kind": st.sampled_from(["partition", "launch_select"]),
        "status": st.sampled_from(["ok", "rejected", "infeasible"]),
        "result": values,
    }
)


def printed_before(record: bytes) -> bytes:
    """What ``submit --wait`` printed for ``record`` by decoding it and encoding the envelope."""
    return encode(fast_json.loads(record)["result"])


@given(envelopes)
def test_an_answer_the_worker_recorded_prints_as_decoding_it_would(envelope: Any) -> None:
    record = success_value("task-1", encode(envelope), WHEN)

    meta = _loads_record(record)

    assert encode(printable(meta["result"])) == printed_before(record)
    assert meta["result"].get("status") == envelope["status"]
    assert (meta["status"], meta["task_id"]) == ("SUCCESS", "task-1")


@given(envelopes)
def test_an_answer_celery_recorded_prints_as_decoding_it_would(envelope: Any) -> None:
    meta = {"status": "SUCCESS", "result": envelope, "traceback": None, "children": []}
    record = kombu_json.dumps(meta | {"date_done": WHEN.isoformat(), "task_id": "t"}).encode()

    decoded = _loads_record(record)

    assert not isinstance(decoded["result"], RawEnvelope)  # its ", " separators differ
    assert encode(printable(decoded["result"])) == printed_before(record)


# An integer key makes orjson refuse the envelope: the codec's fallback (the standard
# library, ASCII only) writes it, and these values then differ from what printing writes.
@pytest.mark.parametrize(
    "value",
    [
        *(1e-05, 1.5e-07, float("nan"), float("inf"), -float("inf"), "é", "\x7f", 2**70),
        {"__type__": "datetime", "__value__": "2026-12-07T19:30:00"},  # kombu's marker
    ],
)
def test_an_answer_the_codec_fell_back_for_prints_as_decoding_it_would(value: Any) -> None:
    envelope = {"job_id": "j", "kind": "partition", "status": "ok", "result": {1: [value]}}
    record = success_value("task-1", encode(envelope), WHEN)

    assert encode(printable(_loads_record(record)["result"])) == printed_before(record)


def test_a_plain_answer_is_printed_from_the_record_without_decoding_it() -> None:
    envelope = {"job_id": "j-1", "kind": "launch_select", "status": "ok", "result": {"n": 1.5}}
    record = success_value("task-1", encode(envelope), WHEN)

    answer = _loads_record(record)["result"]

    assert isinstance(answer, RawEnvelope)
    assert answer.get("status") == "ok"
    assert encode(printable([answer, answer])) == (
        b'[{"job_id":"j-1","kind":"launch_select","status":"ok","result":{"n":1.5}},'
        b'{"job_id":"j-1","kind":"launch_select","status":"ok","result":{"n":1.5}}]'
    )


def test_a_failure_record_is_decoded_as_before() -> None:
    record = b'{"status": "FAILURE", "result": {"exc_type": "ValueError"}, "task_id": "t"}'

    assert _loads_record(record) == fast_json.loads(record)
