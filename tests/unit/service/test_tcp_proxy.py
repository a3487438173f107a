"""The fault-injecting proxy of the fault tests (tests/support/tcp_proxy.py) does what
they rely on: it forwards, freezes only what is open, resets, and delays."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from tests.support.tcp_proxy import TcpProxy, proxied


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def echo_port() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _connect(proxy: TcpProxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
    sock.settimeout(0.5)
    return sock


def _echoes(sock: socket.socket, data: bytes = b"ping") -> bool:
    sock.sendall(data)
    try:
        return sock.recv(4096) == data
    except TimeoutError:
        return False


def test_a_frozen_connection_stays_open_and_silent_while_a_new_one_passes(echo_port: int) -> None:
    with proxied(echo_port) as proxy:
        old = _connect(proxy)
        assert _echoes(old)
        assert proxy.freeze_open() == 1
        assert not _echoes(old, b"lost")
        new = _connect(proxy)
        assert _echoes(new)
        assert proxy.open_connections() == 2


def test_a_reset_connection_is_refused_at_the_next_read(echo_port: int) -> None:
    with proxied(echo_port) as proxy:
        sock = _connect(proxy)
        assert _echoes(sock)
        assert proxy.reset_all() == 1
        with pytest.raises(ConnectionResetError):  # a reset, not a clean end
            sock.recv(10)


def test_latency_delays_each_way(echo_port: int) -> None:
    with proxied(echo_port) as proxy:
        proxy.latency = 0.2
        sock = _connect(proxy)
        sock.settimeout(2)
        started = time.monotonic()
        assert _echoes(sock)
        assert time.monotonic() - started >= 0.4


def test_a_blackhole_silences_new_connections_until_lifted(echo_port: int) -> None:
    with proxied(echo_port) as proxy:
        proxy.set_blackhole(True)
        sock = _connect(proxy)
        assert not _echoes(sock)
        proxy.set_blackhole(False)
        sock.settimeout(2)
        assert sock.recv(4096) == b"ping"
