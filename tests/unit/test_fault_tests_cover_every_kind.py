"""The fault and replay tests send every registered kind, so a new kind is covered by them
the day it is added (their job lists are the registry's, not hand-kept copies)."""

from apportion import kinds
from tests.support.golden import SOLVERS
from tests.support.hostile_stream import QUEUE, templates
from tests.support.jobs import VARIANTS


def test_the_mixed_job_variants_send_every_registered_kind() -> None:
    assert {kind for kind, _ in VARIANTS.values()} == set(kinds.names())


def test_the_replay_and_hostile_stream_helpers_know_every_kind_that_answers_from_its_job() -> None:
    pure = set(kinds.names()) - {"launch_outcome"}  # its answer depends on the history
    assert set(SOLVERS) == pure
    assert set(templates()) == pure
    assert {name: kinds.get(name).queue for name in kinds.names()} == QUEUE
    assert QUEUE["heal_org"] == "attach"
