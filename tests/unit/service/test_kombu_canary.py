"""Canary: the kombu internals workers/broker/transport.py builds on are still there.

The transport subclasses kombu's Redis transport to fix four faults (its docstring).
That needs members kombu does not promise to keep. Each is named here, so that a kombu
upgrade that renames or removes one fails with a message naming it, instead of a worker
that misbehaves under load.
"""

from __future__ import annotations

import inspect

import kombu
import pytest
from kombu.transport import redis as kombu_redis

# What the transport reads, overrides or calls, and why.
CHANNEL_INTERNALS = {
    "_connparams": "overridden: rebuilds the pool from the info the channel opened with (fix 1)",
    "_brpop_start": "overridden: pops waiting messages atomically into unacked (fix 3)",
    "_queue_cycle": "the round-robin over queues the pop script follows",
    "_q_for_pri": "the Redis list name of a queue at a priority",
    "_get_message_priority": "a restored message goes back to its priority's list (fix 2)",
    "_tag_to_queue": "delivery tag → queue, for no-ack queues",
    "priority_steps": "the priority lists the pop script looks at",
    "unacked_key": "the hash the pop script records messages in",
    "unacked_index_key": "the sorted set the pop script indexes them by",
    "global_keyprefix": "keys the pop script touches carry it",
    "sep": "queue names in list names",
    "conn_or_acquire": "a client for requeueing kept messages (fix 2)",
    "basic_consume": "overridden: requeues kept messages on reconnection",
    "basic_cancel": "overridden: forgets no-ack queues",
    "active_queues": "the queues the channel consumes from",
}
TRANSPORT_INTERNALS = {
    "_deliver": "overridden: keeps a message whose delivery failed on a lost connection",
    "register_with_event_loop": "overridden: adds the wake-up socket (fix 4)",
    "Channel": "replaced by the fixed channel",
}


def test_kombu_is_the_version_the_transport_was_written_against() -> None:
    major, minor = (int(part) for part in kombu.__version__.split(".")[:2])
    assert (major, minor) == (5, 6) or (major, minor) == (5, 7), (
        f"kombu {kombu.__version__}: workers/broker/transport.py was checked against 5.6 and "
        "5.7; re-read kombu/transport/redis.py for the members named in this file"
    )


@pytest.mark.parametrize(("name", "why"), CHANNEL_INTERNALS.items())
def test_the_redis_channel_still_has(name: str, why: str) -> None:
    members = dict(inspect.getmembers(kombu_redis.Channel))
    # Instance attributes are set in __init__ of the channel or one of its bases.
    sources = "".join(
        inspect.getsource(cls)
        for cls in kombu_redis.Channel.__mro__
        if cls.__module__ != "builtins"
    )
    assert name in members or f"self.{name} =" in sources, (
        f"kombu.transport.redis.Channel no longer has {name!r} ({why})"
    )


@pytest.mark.parametrize(("name", "why"), TRANSPORT_INTERNALS.items())
def test_the_redis_transport_still_has(name: str, why: str) -> None:
    assert hasattr(kombu_redis.Transport, name), (
        f"kombu.transport.redis.Transport no longer has {name!r} ({why})"
    )
