"""A slow client cannot hold the studio's connections: the header and body deadlines,
through the real uvicorn server (workers/studio/serve.py) on a real socket.

Also the canary of the uvicorn internals ``HeaderDeadline`` is built on.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import fakeredis
import pytest

from apportion.limits import DEFAULT_LIMITS
from apportion.workers.policies.store import PolicyStore
from apportion.workers.redis.keys import Keys
from apportion.workers.studio.app import Studio, StudioConfig
from apportion.workers.studio.serve import HeaderDeadline, server
from tests.support.processes import free_port, wait_until

HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 1.5
# asyncio runs a timer up to its clock resolution early, and the server's clock starts a
# moment before the client's: a deadline is "kept" within this much on the early side.
EARLY = 0.05


@pytest.fixture(scope="module")
def address() -> Iterator[tuple[str, int]]:
    store = PolicyStore(fakeredis.FakeRedis(), Keys("apportion"))
    studio = Studio(StudioConfig(limits=DEFAULT_LIMITS, body_timeout=BODY_TIMEOUT), store)
    port = free_port()
    running = server(studio, "127.0.0.1", port, header_timeout=HEADER_TIMEOUT, log_level="warning")
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    wait_until(lambda: running.started, 20, what="studio server started")
    yield "127.0.0.1", port
    running.should_exit = True
    thread.join(10)


def closed_after(conn: socket.socket) -> tuple[float, bytes]:
    """Seconds until the server closes ``conn``, and what it sent before."""
    start = time.monotonic()
    conn.settimeout(30)
    got = b""
    while chunk := conn.recv(65536):
        got += chunk
    return time.monotonic() - start, got


def test_a_client_trickling_its_headers_is_closed_at_the_header_timeout(
    address: tuple[str, int],
) -> None:
    with socket.create_connection(address) as conn:
        conn.sendall(b"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
        waited, got = closed_after(conn)

    assert got == b""
    assert HEADER_TIMEOUT - EARLY <= waited < HEADER_TIMEOUT + 2


def test_an_idle_connection_after_an_answer_gets_the_header_timeout_again(
    address: tuple[str, int],
) -> None:
    with socket.create_connection(address) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        conn.settimeout(10)
        assert conn.recv(65536).startswith(b"HTTP/1.1 200")
        # A byte of the next request now and then: uvicorn's keep-alive timer alone
        # would be reset by each.
        start = time.monotonic()
        try:
            for byte in b"GET / HTTP/1.1\r\n":
                conn.sendall(bytes([byte]))
                time.sleep(0.2)
        except OSError:
            pass
        waited, _ = closed_after(conn)

    assert time.monotonic() - start - waited < HEADER_TIMEOUT + 2


def test_a_client_trickling_its_body_is_answered_408_and_closed_at_the_body_timeout(
    address: tuple[str, int],
) -> None:
    with socket.create_connection(address) as conn:
        conn.sendall(
            b"POST /api/evaluate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
            b'\r\nX-Apportion-Studio: 1\r\nContent-Length: 100\r\n\r\n{"deployable"'
        )
        waited, got = closed_after(conn)

    assert got.startswith(b"HTTP/1.1 408 ")
    assert b"did not arrive within 1.5 s" in got
    assert BODY_TIMEOUT - EARLY <= waited < BODY_TIMEOUT + 2


def test_canary_uvicorn_h11_protocol_still_has_the_attributes_the_deadline_uses() -> None:
    # HeaderDeadline overrides these methods and reads self.loop, self.conn and
    # self.transport, which uvicorn sets in __init__ / connection_made.
    for name in ("connection_made", "handle_events", "on_response_complete", "connection_lost"):
        assert callable(getattr(HeaderDeadline.__mro__[1], name))
    import inspect

    source = inspect.getsource(HeaderDeadline.__mro__[1])
    for attribute in ("self.loop", "self.conn", "self.transport"):
        assert attribute in source
