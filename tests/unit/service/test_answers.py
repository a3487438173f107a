"""One answer per job: bounded, published once, the same on the stream and in the backend."""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import Any

import fakeredis
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.contracts import Envelope
from apportion.limits import Limits
from apportion.workers.redis.keys import Keys
from apportion.workers.results import fast_json
from apportion.workers.results.answers import bounded, fingerprint, maybe_float_or_nan, settle
from apportion.workers.results.publisher import MemoryPublisher, StreamPublisher


def envelope(job_id: str, result: dict[str, object] | None = None) -> Envelope:
    return Envelope(
        job_id=job_id,
        kind="launch_select",
        status="ok",
        result=result if result is not None else {"n": 1},
        engine_version="0.1.0",
        elapsed_ms=12.5,
    )


def test_an_envelope_over_the_limit_is_replaced_by_a_rejection_naming_the_limit() -> None:
    big = envelope("j", {"candidates": ["x" * 100] * 100})

    answer, text = bounded(big, Limits(max_envelope_bytes=2048))

    assert answer.status == "rejected"
    assert answer.error is not None
    assert answer.error.code == "result_too_large"
    assert "APPORTION_LIMITS__MAX_ENVELOPE_BYTES" in answer.error.message
    assert (answer.job_id, answer.kind, answer.elapsed_ms) == ("j", "launch_select", 12.5)
    assert len(text) < 2048


def test_an_envelope_within_the_limit_is_kept_with_its_json() -> None:
    small = envelope("j")

    answer, text = bounded(small, Limits())

    assert answer is small
    assert b'"job_id":"j"' in text


def test_the_fingerprint_ignores_key_order_and_sees_any_other_difference() -> None:
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": [1, 2], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    assert fingerprint({"a": "\ud800"})  # lone surrogates still fingerprint


def _fingerprint_as_json_dumps_writes_it(job: Any) -> str:
    try:
        text = json.dumps(job, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = f"<{type(job).__name__}>"
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0.0, -0.0, 1e16, 1e-05, 5.0, 1e300, 123456789.0])
    | st.text()
    | st.sampled_from(["null", "1e5", "x.1", '\x00\x1f\x7f"\\/\u2028', "\ud800"])
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
        | st.dictionaries(st.integers(), inner, max_size=2)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(_JSON)
def test_the_fingerprint_is_the_digest_of_what_json_dumps_writes(job: Any) -> None:
    assert fingerprint(job) == _fingerprint_as_json_dumps_writes_it(job)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=40) | st.text(alphabet="0129.eEnulNUL x", max_size=40).map(str.encode))
def test_the_float_or_nan_check_finds_what_its_regular_expression_finds(text: bytes) -> None:
    expected = re.search(rb"[0-9][.eE]|null", text) is not None

    assert maybe_float_or_nan(text) is expected


def test_the_float_or_nan_check_at_the_edges_of_the_text() -> None:
    for found in (b"9.", b"x1e", b"5E", b"null", b'{"a":null}'):
        assert maybe_float_or_nan(found), found
    assert not maybe_float_or_nan(b'{"size":40000,"id":"e.x","n":"nul"}')
    assert not maybe_float_or_nan(b"")
    assert not maybe_float_or_nan(b".5")
    assert not maybe_float_or_nan(b"Null")


def test_the_fingerprint_of_a_seed_job_is_the_one_earlier_versions_stored() -> None:
    job = {"job_id": "j-1", "hardware": {"disks": [{"id": "sda", "size": 40000}]}, "s": "é"}

    assert fingerprint(job) == _fingerprint_as_json_dumps_writes_it(job)
    assert fingerprint([[job], {}]) == _fingerprint_as_json_dumps_writes_it([[job], {}])


def test_a_second_job_with_the_same_id_and_other_content_is_rejected_and_not_published() -> None:
    pub = MemoryPublisher()
    first = settle(pub, envelope("j"), fingerprint({"x": 1}))

    second = settle(pub, envelope("j", {"n": 2}), fingerprint({"x": 2}))

    assert first.status == "ok"
    assert second.status == "rejected"
    assert second.error is not None
    assert second.error.code == "duplicate_job_id"
    assert len(pub.events) == 1


def test_the_same_job_again_gets_the_published_envelope_not_a_new_one() -> None:
    pub = MemoryPublisher()
    settle(pub, envelope("j", {"dice": 1}), fingerprint({"x": 1}))

    again = settle(pub, envelope("j", {"dice": 2}), fingerprint({"x": 1}))

    assert again.result == {"dice": 1}
    assert len(pub.events) == 1


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


def test_result_streams_are_trimmed_by_age_as_well_as_by_count(
    client: fakeredis.FakeRedis,
) -> None:
    stream = Keys().results_stream("launch_select")
    old = int((time.time() - 3 * 86_400) * 1000)
    for i in range(300):  # three days old: beyond a one-day age limit
        client.xadd(stream, {"job_id": f"old-{i}"}, id=f"{old}-{i}")
    pub = StreamPublisher(client, Keys(), maxlen=100_000, dedup_ttl=60, max_age_seconds=86_400)

    pub.publish(envelope("new"))

    # MINID ~ trims whole macro nodes: the old entries go, the new one stays.
    ids = [fields[b"job_id"] for _, fields in client.xrange(stream)]
    assert b"new" in ids
    assert len(ids) < 300


def test_a_duplicate_job_id_decided_before_publishing_is_never_published() -> None:
    from apportion.contracts import Envelope, ErrorInfo
    from apportion.workers.results.answers import settle_recorded
    from apportion.workers.results.publisher import MemoryPublisher

    publisher = MemoryPublisher()
    envelope = Envelope.rejected(
        "e1", "launch_outcome", ErrorInfo(code="duplicate_job_id", message="taken")
    )

    answer, recorded = settle_recorded(publisher, envelope, "digest")

    assert answer == envelope
    assert recorded is False
    assert publisher.events == []


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_the_fingerprint_of_a_job_orjson_decoded_is_the_digest_of_what_json_dumps_writes(
    job: Any,
) -> None:
    body = json.dumps([[job], {}, {}], allow_nan=True)
    decoded = fast_json.loads(body)
    the_job = decoded[0][0]

    finite = fast_json.take_finite(the_job)

    assert fingerprint(the_job, finite=finite) == _fingerprint_as_json_dumps_writes_it(the_job)
