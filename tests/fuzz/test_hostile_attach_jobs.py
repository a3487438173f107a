"""Hostile auto_attach, guest_host_attach and heal_org jobs are answered (tests/fuzz/hostile.py
says what that means); apart from the other kinds' so that the suite's processes share them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from apportion.engine import run
from tests.fuzz.hostile import CTX, FAST, answered, mutated

# A hostile value must be answered cleanly, not by casting garbage: numpy's
# "invalid value encountered in cast" once came from inventories of rejected jobs.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


@FAST
@given(mutated("auto_attach.json"))
def test_hostile_auto_attach_jobs_are_answered(job: Any) -> None:
    answered(run("auto_attach", job, CTX))


@settings(FAST, max_examples=1_300)
@given(mutated("guest_host_attach.json"))
def test_hostile_guest_host_attach_jobs_are_answered(job: Any) -> None:
    answered(run("guest_host_attach", job, CTX))


@settings(FAST, max_examples=600)
@given(mutated("heal_org.json"))
def test_hostile_heal_org_jobs_are_answered(job: Any) -> None:
    env = run("heal_org", job, CTX)

    answered(env)
    if env.status == "ok":
        assert env.result is not None
        for answer in env.result["consumers"]:
            assert answer["status"] in ("ok", "rejected")
