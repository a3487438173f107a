"""Scripts on a connection of their own (workers/redis/direct.py): the pop and the ack."""

from __future__ import annotations

import fakeredis
import pytest

from apportion.workers.redis.direct import DirectScripts, LuaScript

INCR = LuaScript("return redis.call('INCRBY', KEYS[1], ARGV[1])")


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


def test_a_script_runs_and_is_loaded_on_first_use(client: fakeredis.FakeRedis) -> None:
    scripts = DirectScripts()

    assert scripts.run(client.connection_pool, INCR, ["n"], [2]) == 2
    assert scripts.run(client.connection_pool, INCR, ["n"], [3]) == 5
    assert client.script_exists(INCR.sha) == [True]


def test_a_flushed_script_cache_is_filled_again(client: fakeredis.FakeRedis) -> None:
    scripts = DirectScripts()
    scripts.run(client.connection_pool, INCR, ["n"], [1])

    client.script_flush()

    assert scripts.run(client.connection_pool, INCR, ["n"], [1]) == 2


class Interrupted(BaseException):
    """Stands in for a signal raised between a command and its reply."""


def test_a_reply_left_unread_by_an_interruption_is_never_taken_for_the_next_one(
    client: fakeredis.FakeRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripts = DirectScripts()
    scripts.run(client.connection_pool, INCR, ["n"], [1])  # connects
    conn = scripts._connection
    assert conn is not None
    real_read = conn.read_response
    calls = iter([True])

    def read_once_interrupted(*args: object, **kwargs: object) -> object:
        if next(calls, False):
            raise Interrupted  # the reply (11) stays on the wire
        return real_read(*args, **kwargs)

    monkeypatch.setattr(conn, "read_response", read_once_interrupted)
    with pytest.raises(Interrupted):
        scripts.run(client.connection_pool, INCR, ["n"], [10])

    assert scripts.run(client.connection_pool, INCR, ["n"], [100]) == 111  # not 11


def test_a_forked_child_and_a_replaced_pool_get_connections_of_their_own(
    client: fakeredis.FakeRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripts = DirectScripts()
    scripts.run(client.connection_pool, INCR, ["n"], [1])
    parents = scripts._connection

    monkeypatch.setattr("apportion.workers.redis.direct.os.getpid", lambda: -1)  # as after fork
    scripts.run(client.connection_pool, INCR, ["n"], [1])
    childs = scripts._connection
    assert childs is not parents

    other = fakeredis.FakeRedis()  # kombu's new pool after a connection loss
    assert scripts.run(other.connection_pool, INCR, ["n"], [1]) == 1
    assert scripts._connection is not childs
    assert other.get("n") == b"1"
    assert client.get("n") == b"2"


def test_closing_drops_the_connection(client: fakeredis.FakeRedis) -> None:
    scripts = DirectScripts()
    scripts.run(client.connection_pool, INCR, ["n"], [1])

    scripts.close()

    assert scripts._connection is None
    assert scripts.run(client.connection_pool, INCR, ["n"], [1]) == 2
