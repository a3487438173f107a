"""A fault-injecting TCP proxy for tests: a process talks to Redis through it, and the
test breaks the network between them the ways real networks break.

    proxy = TcpProxy("127.0.0.1", redis_server.port)
    proxy.start()                  # listens on 127.0.0.1:proxy.port
    ...                            # point the worker at proxy.port
    proxy.freeze_open()            # the open connections go silent, new ones pass
    proxy.reset_all()              # every open connection is reset (RST)
    proxy.latency = 0.2            # each chunk forwarded 200 ms late, each way
    proxy.blackhole = True         # nothing is forwarded on any connection, old or new
    proxy.lose_reply_to(b"EXEC")   # the next chunk sent with EXEC in it reaches Redis,
                                   # then its connection freezes: the reply is lost
    proxy.stop()

A frozen connection stops forwarding in both directions without closing either side
and without reading further: what a failover or a dead NAT entry does (no reset, no
FIN; the peer's data is simply never delivered). Connections opened after
:meth:`freeze_open` pass normally. The proxy runs its own asyncio loop in a thread, so
every method may be called from the test's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

_CHUNK = 65536


@dataclass(eq=False)
class _Pair:
    """One proxied connection: the client's side and the upstream side."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    frozen: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def close(self, reset: bool) -> None:
        for writer in (self.client, self.upstream):
            sock = writer.get_extra_info("socket")
            if reset and sock is not None:
                # Linger 0: close sends RST instead of FIN.
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.close()
        for task in self.tasks:
            task.cancel()


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int, host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = host
        self.port = 0
        # Seconds each chunk waits before it is forwarded (each direction).
        self.latency = 0.0
        # Forward nothing on any connection (new ones are accepted, then stay silent).
        self.blackhole = False
        self._pairs: set[_Pair] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._wake: asyncio.Event | None = None
        # lose_reply_to's patterns while armed, and how many replies it lost.
        self._lose_reply_to: tuple[bytes, ...] = ()
        self.replies_lost = 0

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        ready = threading.Event()

        def run() -> None:
            loop = self._loop = asyncio.new_event_loop()
            self._wake = asyncio.Event()
            self._server = loop.run_until_complete(
                asyncio.start_server(self._accept, self.host, self.port)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="tcp-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the TCP proxy did not start")

    def stop(self) -> None:
        if self._loop is None:
            return

        async def shut() -> None:
            assert self._server is not None
            self._server.close()
            for pair in list(self._pairs):
                pair.close(reset=False)
            self._pairs.clear()

        self._call(shut())
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    def __enter__(self) -> TcpProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """A redis:// URL (database 0) through the proxy."""
        return f"redis://{self.host}:{self.port}/0"

    # -- faults ----------------------------------------------------------------------
    def freeze_open(self) -> int:
        """Stop forwarding on every connection open now, in both directions, without
        closing it; connections opened later pass. Returns how many were frozen."""

        async def freeze() -> int:
            for pair in self._pairs:
                pair.frozen = True
            return len(self._pairs)

        return self._call(freeze())

    def thaw(self) -> None:
        """Forward again on frozen connections (what was held is delivered late)."""

        async def thaw() -> None:
            for pair in self._pairs:
                pair.frozen = False
            self._nudge()

        self._call(thaw())

    def reset_all(self) -> int:
        """Reset (RST) every open connection, both sides. Returns how many."""

        async def reset() -> int:
            pairs = list(self._pairs)
            self._pairs.clear()
            for pair in pairs:
                pair.close(reset=True)
            return len(pairs)

        return self._call(reset())

    def open_connections(self) -> int:
        """Connections open through the proxy now (frozen ones included)."""

        async def count() -> int:
            return len(self._pairs)

        return self._call(count())

    def lose_reply_to(self, *patterns: bytes) -> None:
        """Once: the next chunk a client sends that contains every one of ``patterns``
        reaches Redis, and its connection is then frozen (as :meth:`freeze_open`), so
        Redis runs what it carried and the reply never arrives: a connection that died
        after Redis ran a command. Other connections, and new ones, pass."""
        self._lose_reply_to = patterns

    def set_blackhole(self, on: bool) -> None:
        self.blackhole = on
        if not on and self._loop is not None:
            self._loop.call_soon_threadsafe(self._nudge)

    # -- internals -------------------------------------------------------------------
    def _call(self, coro: object) -> int:
        assert self._loop is not None, "the proxy is not started"
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]
        return future.result(10)  # type: ignore[no-any-return]

    def _nudge(self) -> None:
        assert self._wake is not None
        self._wake.set()
        self._wake = asyncio.Event()

    async def _held(self, pair: _Pair) -> None:
        """Wait while ``pair`` may not forward (frozen, or the proxy blackholes)."""
        while pair.frozen or self.blackhole:
            assert self._wake is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.05)

    async def _pump(
        self,
        pair: _Pair,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        to_upstream: bool = False,
    ) -> None:
        try:
            while True:
                await self._held(pair)
                data = await reader.read(_CHUNK)
                if not data:
                    break
                if self.latency:
                    await asyncio.sleep(self.latency)
                await self._held(pair)
                patterns = self._lose_reply_to
                if to_upstream and patterns and all(p in data for p in patterns):
                    # Frozen before the chunk goes: the other direction holds the reply.
                    self._lose_reply_to = ()
                    self.replies_lost += 1
                    pair.frozen = True
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            if pair in self._pairs:
                self._pairs.discard(pair)
                pair.close(reset=False)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        pair = _Pair(writer, up_writer)
        self._pairs.add(pair)
        pair.tasks = [
            asyncio.ensure_future(self._pump(pair, reader, up_writer, to_upstream=True)),
            asyncio.ensure_future(self._pump(pair, up_reader, writer)),
        ]


@contextlib.contextmanager
def proxied(upstream_port: int, upstream_host: str = "127.0.0.1") -> Iterator[TcpProxy]:
    """A started proxy to ``upstream_host:upstream_port``, stopped afterwards."""
    proxy = TcpProxy(upstream_host, upstream_port)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


__all__ = ["TcpProxy", "proxied"]
