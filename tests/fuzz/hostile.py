"""Strategies for malformed and hostile jobs (valid examples with one field broken), the
settings the hostile-job tests share and what "answered" means for them."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from apportion.contracts import Envelope
from apportion.engine import Context
from apportion.limits import Limits
from tests.conftest import load_example

Path = tuple[str | int, ...]


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


HOSTILE_SCALARS: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    -2,
    1,
    2**31,
    2**53 + 1,
    2**63,
    -(2**63) - 1,
    10**400,
    -(10**400),
    0.5,
    -0.0,
    1e308,
    -1e308,
    5e-324,
    float("nan"),
    float("inf"),
    float("-inf"),
    "",
    " ",
    "x" * 70_000,
    "\x00",
    "\ud800",
    "💥" * 100,
    "ｆｕｌｌ",
    "Robert'); DROP TABLE--",
    "yaql=",
    "yaql=$.",
    "in:",
    "!",
    ",,,",
    "-1",
    "NaN",
    "1e999",
    "2026-13-45T99:99:99Z",
    "0x10",
    "∞",
]
HOSTILE_CONTAINERS: list[Any] = [
    [],
    {},
    [None],
    [[]],
    {"": None},
    {"\x00": 1},
    nested(60),
    nested(400),
    list(range(2000)),
    {str(i): i for i in range(500)},
]

hostile_values = st.one_of(
    st.sampled_from(HOSTILE_SCALARS),
    st.sampled_from(HOSTILE_CONTAINERS),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
        ),
        max_leaves=12,
    ),
)


def paths(value: Any, prefix: Path = ()) -> Iterator[Path]:
    """Every location in a JSON document, the root's children first."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield (*prefix, key)
            yield from paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield (*prefix, i)
            yield from paths(child, (*prefix, i))


def replaced(doc: Any, path: Path, value: Any) -> Any:
    out = copy.deepcopy(doc)
    target = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return out


def deleted(doc: Any, path: Path) -> Any:
    out = copy.deepcopy(doc)
    target = out
    for step in path[:-1]:
        target = target[step]
    del target[path[-1]]
    return out


@st.composite
def mutated(draw: st.DrawFn, example: str, *, avoid: tuple[str, ...] = (), base: Any = None) -> Any:
    """The example (or ``base``) with one to three fields replaced or removed."""
    doc = copy.deepcopy(base) if base is not None else load_example(example)
    for _ in range(draw(st.integers(1, 3))):
        candidates = [p for p in paths(doc) if not any(str(s) in avoid for s in p)]
        if not candidates:
            break
        path = draw(st.sampled_from(candidates))
        if draw(st.integers(0, 4)) == 0:
            doc = deleted(doc, path)
        else:
            doc = replaced(doc, path, draw(hostile_values))
    return doc


FAST = settings(
    max_examples=2_600,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
# yaql expressions are evaluated in a forked, time-limited child; a hostile one costs up
# to the time limit, so the generated partition jobs avoid strings in sized fields and
# the bombs are listed explicitly (tests/fuzz/test_hostile_partition_jobs.py).
CTX = Context(limits=Limits(yaql_timeout_seconds=0.5))


def answered(env: Envelope) -> None:
    """Answered cleanly: ``rejected`` with ``internal_error`` would mean an input reached
    code that did not expect it (tests/fuzz/test_hostile_jobs.py)."""
    assert env.status in ("ok", "infeasible", "rejected")
    if env.status == "ok":
        assert env.result is not None
        assert env.error is None
    else:
        assert env.error is not None
        assert env.error.code != "internal_error", env.error.message
        assert "Traceback" not in env.error.message
