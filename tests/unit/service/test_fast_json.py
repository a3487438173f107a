"""The JSON decoder registered for Celery's messages and results gives what kombu's does."""

from __future__ import annotations

import datetime
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kombu.exceptions import DecodeError
from kombu.serialization import dumps as kombu_dumps
from kombu.serialization import loads as registry_loads
from kombu.utils import json as kombu_json

from apportion.workers.results import fast_json

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@given(json_values)
def test_plain_json_decodes_to_what_kombu_decodes(value: Any) -> None:
    text = json.dumps(value)

    # Compared as text: 1e30 == 10**30 in Python, but an int and a float are not the same job.
    expected = json.dumps(kombu_json.loads(text))
    assert json.dumps(fast_json.loads(text)) == expected
    assert json.dumps(fast_json.loads(text.encode())) == expected


def test_an_integer_beyond_64_bits_stays_an_int_though_orjson_would_make_it_a_float() -> None:
    got = fast_json.loads(b'{"ram": 1000000000000000000000000000000, "n": [-10000000000000000000]}')

    assert type(got["ram"]) is int
    assert got["ram"] == 10**30
    assert got["n"] == [-(10**19)]
    assert type(got["n"][0]) is int


def test_what_orjson_refuses_is_decoded_by_kombu_as_before() -> None:
    got = fast_json.loads('{"size": NaN, "n": 18446744073709551616, "s": "\\ud800"}')

    assert math.isnan(got["size"])
    assert got["n"] == 18446744073709551616
    assert got["s"] == "\ud800"


def test_kombus_typed_objects_still_come_back_as_their_types() -> None:
    when = datetime.datetime(2026, 12, 7, 18, 0, tzinfo=datetime.UTC)
    _type, _encoding, text = kombu_dumps({"at": when}, serializer="json")

    assert fast_json.loads(text) == {"at": when}


def test_buffers_decode_like_bytes() -> None:
    assert fast_json.loads(memoryview(b'{"a": [1, 2.5]}')) == {"a": [1, 2.5]}
    assert fast_json.loads(bytearray(b"[true, null]")) == [True, None]


def test_once_installed_celerys_json_is_decoded_by_it(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    real = fast_json.orjson.loads
    monkeypatch.setattr(fast_json.orjson, "loads", lambda data: seen.append(data) or real(data))
    fast_json.install()

    assert registry_loads(b'{"a": 1}', "application/json", "utf-8") == {"a": 1}
    assert seen[0] == b'{"a": 1}'
    with pytest.raises(DecodeError):
        registry_loads(b"{not json", "application/json", "utf-8")


def test_a_job_orjson_decoded_is_known_finite_once_and_only_that_job() -> None:
    body = fast_json.loads(b'[[{"policy": null, "n": 1.5}], {}, {}]')
    job = body[0][0]

    assert not fast_json.take_finite({"policy": None, "n": 1.5})  # equal, not the same
    body = fast_json.loads(b'[[{"policy": null, "n": 1.5}], {}, {}]')
    assert fast_json.take_finite(body[0][0])
    assert not fast_json.take_finite(body[0][0])  # forgotten once asked
    assert job == body[0][0]


def test_a_job_kombu_decoded_is_not_known_finite() -> None:
    body = fast_json.loads(b'[[{"weight": NaN}], {}, {}]')

    assert math.isnan(body[0][0]["weight"])
    assert not fast_json.take_finite(body[0][0])
