"""A taking list's name says which queue list its items go back to, whatever the queue
is called (workers/redis/keys.py, Keys.taking; workers/broker/transport.py puts lists
back by it)."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from apportion.workers.redis.keys import Keys


@given(source=st.text(min_size=1), prefix=st.text(alphabet="abcxyz-_:", min_size=1))
def test_a_taking_list_names_the_queue_list_it_came_from(source: str, prefix: str) -> None:
    keys = Keys(prefix)
    token = uuid.uuid4().hex

    taking = keys.taking(token, source)

    assert keys.taking_source(taking) == source
    assert taking.startswith(keys.taking_prefix)


def test_a_priority_lists_taking_list_goes_back_to_that_priority() -> None:
    # kombu names priority lists "<queue>\x06\x16<priority>".
    assert Keys().taking_source(Keys().taking("t0", "launch\x06\x163")) == "launch\x06\x163"


def test_other_keys_are_no_taking_lists() -> None:
    assert Keys().taking_source("apportion:takers") is None
    assert Keys().taking_source("apportion:taking:no-source-here") is None
    assert Keys("other").taking_source(Keys().taking("t0", "launch")) is None
