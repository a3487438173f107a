"""Hostile launch_select jobs and query strings and launch_outcome events are answered
(tests/fuzz/hostile.py says what that means)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.engine import run
from tests.fuzz.hostile import CTX, FAST, answered, mutated

# A hostile value must be answered cleanly, not by casting garbage: numpy's
# "invalid value encountered in cast" once came from inventories of rejected jobs.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


@FAST
@given(st.one_of(mutated("launch_select.candidates.json"), mutated("launch_select.json")))
def test_hostile_launch_select_jobs_are_answered(job: Any) -> None:
    answered(run("launch_select", job, CTX))


@settings(FAST, max_examples=1_300)
@given(st.text(max_size=300))
def test_any_query_string_is_answered(request: str) -> None:
    job = {
        "providers": [{"uuid": "cn", "inventories": {"VCPU": {"total": 4}}}],
        "request": request,
        "policy": None,
    }
    answered(run("launch_select", job, CTX))


@settings(FAST, max_examples=600)
@given(mutated("launch_outcome.json"))
def test_hostile_launch_outcome_events_are_answered(job: Any) -> None:
    answered(run("launch_outcome", job, CTX))
