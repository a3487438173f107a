"""The transport's pub/sub connection (fanout queues: Celery's remote control) against a
real redis-server: a read from the event loop never waits for a message.

kombu's health check drops a pub/sub connection that missed its PINGs; redis-py's
blocking read then connects afresh, subscribed to nothing, and would wait until the
connection died: the worker's whole loop with it (issue #29).
"""

from __future__ import annotations

import select
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from kombu import Connection, Consumer, Exchange, Queue

from tests.support.processes import wait_until

pytestmark = pytest.mark.redis

TRANSPORT = "apportion.workers.broker.transport:Transport"
# The longest one read from the event loop may take here (a local Redis answers in well
# under a millisecond; the socket timeout bounds a read whatever happens).
READ_BOUND = 3.0
OPTIONS = {"socket_timeout": 1, "socket_connect_timeout": 1, "health_check_interval": 4}


@pytest.fixture
def server(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def broadcast(redis_url: str) -> Iterator[tuple[Connection, Consumer, list[Any]]]:
    """A connection through the transport consuming a fanout queue (LISTEN mode), its
    consumer, and the bodies it received."""
    received: list[Any] = []
    connection = Connection(redis_url, transport=TRANSPORT, transport_options=OPTIONS)
    queue = Queue("bq", Exchange("bcast", type="fanout"), exclusive=True, auto_delete=True)
    consumer = connection.Consumer(
        queue, callbacks=[lambda body, message: received.append(body)], no_ack=True
    )
    consumer.consume()
    try:
        yield connection, consumer, received
    finally:
        connection.release()


def poll_once(connection: Connection, consumer: Consumer) -> None:
    """One turn of the event loop for the LISTEN connection: register (and subscribe)
    it, wait a moment for its socket to be readable, and read it if it is."""
    cycle = connection.transport.cycle
    cycle.on_poll_start()
    readable, _, _ = select.select(list(cycle.fds), [], [], 0.2)
    for fd in readable:
        cycle.on_readable(fd)


def within(seconds: float, call: Any) -> Any:
    """``call()`` in a thread; fails if it has not returned after ``seconds``."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except Exception as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the read still waits after {seconds} s"
    return outcome


def subscribed(server: redis.Redis) -> int:
    return len(server.execute_command("CLIENT", "LIST", "TYPE", "pubsub").splitlines())


def test_a_read_after_the_health_check_dropped_the_pubsub_connection_returns_at_once(
    server: redis.Redis, broadcast: tuple[Connection, Consumer, list[Any]]
) -> None:
    connection, consumer, _ = broadcast
    poll_once(connection, consumer)  # reads the subscription's confirmation
    assert subscribed(server) == 1
    # What kombu's health check does to a connection that missed two PONGs.
    consumer.channel.subclient.connection.disconnect()

    outcome = within(READ_BOUND, consumer.channel._receive)

    assert outcome == {"value": False}


def test_a_read_of_a_subscribed_connection_with_nothing_to_read_returns_at_once(
    server: redis.Redis, broadcast: tuple[Connection, Consumer, list[Any]]
) -> None:
    # A readable event that is stale by the time the loop handles it (its descriptor
    # number reused by another socket meanwhile).
    connection, consumer, _ = broadcast
    poll_once(connection, consumer)
    assert subscribed(server) == 1

    outcome = within(READ_BOUND, consumer.channel._receive)

    assert outcome == {"value": False}


def test_a_read_of_a_pubsub_connection_the_server_closed_returns_at_once(
    server: redis.Redis, broadcast: tuple[Connection, Consumer, list[Any]]
) -> None:
    connection, consumer, _ = broadcast
    poll_once(connection, consumer)
    assert server.execute_command("CLIENT", "KILL", "TYPE", "pubsub") == 1

    outcome = within(READ_BOUND, consumer.channel._receive)

    assert set(outcome) <= {"value", "error"}
    if "error" in outcome:  # kombu reconnects on it
        assert isinstance(outcome["error"], consumer.channel.connection_errors)


@pytest.mark.parametrize("fault", ["health check drop", "server kill"])
def test_a_broadcast_sent_after_the_pubsub_connection_was_lost_is_received_on_the_next_turns(
    server: redis.Redis, broadcast: tuple[Connection, Consumer, list[Any]], fault: str
) -> None:
    connection, consumer, received = broadcast
    poll_once(connection, consumer)
    if fault == "health check drop":
        consumer.channel.subclient.connection.disconnect()
    else:
        server.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
    within(READ_BOUND, lambda: poll_once(connection, consumer))
    # The next turn subscribes again.
    within(READ_BOUND, lambda: poll_once(connection, consumer))
    wait_until(lambda: subscribed(server) == 1, 5, what="the pub/sub connection subscribed again")

    with connection.Producer() as producer:
        producer.publish({"hello": "after"}, exchange=Exchange("bcast", type="fanout"))

    def turn() -> bool:
        within(READ_BOUND, lambda: poll_once(connection, consumer))
        return bool(received)

    wait_until(turn, 5, what="the broadcast received")
    assert received == [{"hello": "after"}]
