"""Lua scripts run over a connection of their own, for the commands a worker sends per job.

redis-py's ``execute_command`` (and its ``Script`` objects and pipelines on top of it)
wraps each command in a pool checkout, which tests the connection with a non-blocking
read (syscalls), its observability hooks and its response callbacks: several times the
CPU of the bytes on the wire for a short command. The worker's main
process sends such commands for every job (the ack, the take's rare scripts), so they go
through a :class:`DirectScripts`: one connection made from the pool's settings
(address, timeouts, health checks, TLS, Sentinel), driven with
``send_command``/``read_response``.

The rules that keep such a connection honest, each tested
(tests/unit/service/test_direct_scripts.py):

* a reply left unread by an interruption (a signal, a dropped socket) drops the
  connection, so it can never be read as the next command's reply;
* a forked child never uses (nor closes) its parent's socket;
* a replaced pool (kombu makes a new one after a connection loss) means a new
  connection from the new pool's settings;
* ``NOSCRIPT`` (first use, or Redis restarted or flushed its scripts) loads the script
  and runs it again.

Retries are the connection's own (redis-py's ``retry`` setting of the pool), as
``execute_command`` applies them: a dropped connection is reconnected and the command
sent again; what is left reaches the caller as redis-py raises it (kombu handles
connection errors as it does for its own commands).
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.connection import ConnectionInterface
from redis.retry import Retry

_NO_RETRY = Retry(NoBackoff(), 0)


@dataclass(frozen=True)
class LuaScript:
    """A script's text and its SHA1 (what EVALSHA names it by)."""

    text: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.text.encode()).hexdigest())


class DirectScripts:
    """Runs scripts on one connection made from ``pool``'s settings (module doc)."""

    def __init__(self) -> None:
        self._connection: ConnectionInterface | None = None
        self._pool: Any = None
        self._pid = 0
        # The event loop is one thread, but kombu may ack from another: one command on
        # the connection at a time.
        self._lock = threading.Lock()

    def run(self, pool: Any, script: LuaScript, keys: list[Any], args: list[Any]) -> Any:
        """EVALSHA ``script`` on a connection of ``pool``'s; its reply as redis-py reads it."""
        with self._lock:
            conn = self._connect(pool)
            retry: Retry = getattr(conn, "retry", None) or _NO_RETRY
            return retry.call_with_retry(
                lambda: _evalsha(conn, script, keys, args), lambda _error: conn.disconnect()
            )

    def call(self, pool: Any, *args: Any) -> Any:
        """One command on the same connection, never sent twice (a command that moves
        data, such as LMOVE, must not be retried blindly): its reply."""
        with self._lock:
            conn = self._connect(pool)
            return _in_step(conn, lambda: _command(conn, *args))

    def transaction(self, pool: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
        """MULTI, ``commands``, EXEC in one round trip, never sent twice: EXEC's replies.
        A command Redis refused to queue (out of memory, say) raises its own error, and
        nothing ran."""
        with self._lock:
            conn = self._connect(pool)
            return _in_step(conn, lambda: _transaction(conn, commands))  # type: ignore[no-any-return]

    def close(self) -> None:
        with self._lock:
            conn, self._connection, self._pool = self._connection, None, None
            if conn is not None and self._pid == os.getpid():
                conn.disconnect()

    def _connect(self, pool: Any) -> ConnectionInterface:
        pid = os.getpid()
        conn = self._connection
        if conn is None or self._pool is not pool or self._pid != pid:
            if conn is not None and self._pid == pid:
                conn.disconnect()  # the pool it came from was replaced
            conn = self._connection = pool.make_connection()
            self._pool = pool
            self._pid = pid
        # Connecting (with the connection's own retries) before the command's retry loop,
        # as the pool's checkout does.
        conn.connect()
        return conn


def _evalsha(conn: ConnectionInterface, script: LuaScript, keys: list[Any], args: list[Any]) -> Any:
    # A no-op while connected. After a failure it reconnects here, not in send_command:
    # behind Sentinel only connect() asks the sentinels where the master is now.
    conn.connect()
    try:
        try:
            return _command(conn, "EVALSHA", script.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            _command(conn, "SCRIPT", "LOAD", script.text)
            return _command(conn, "EVALSHA", script.sha, len(keys), *keys, *args)
    except redis.exceptions.ResponseError:
        raise  # a complete reply: the connection is in step
    except BaseException:
        # Anything else between sending and reading may leave a reply in flight.
        conn.disconnect()
        raise


def _in_step(conn: ConnectionInterface, run: Any) -> Any:
    conn.connect()
    try:
        return run()
    except redis.exceptions.ResponseError:
        raise  # complete replies: the connection is in step
    except BaseException:
        conn.disconnect()  # a reply may be in flight
        raise


def _transaction(conn: ConnectionInterface, commands: list[tuple[Any, ...]]) -> list[Any]:
    conn.send_packed_command(conn.pack_commands([("MULTI",), *commands, ("EXEC",)]))
    refusals: list[redis.exceptions.ResponseError] = []
    for _ in range(len(commands) + 1):  # +OK for MULTI, then +QUEUED or a refusal each
        try:
            conn.read_response()
        except redis.exceptions.ResponseError as exc:
            refusals.append(exc)
    try:
        replies = conn.read_response()
    except redis.exceptions.ResponseError as exc:
        raise (refusals[0] if refusals else exc) from None
    for reply in replies:
        if isinstance(reply, redis.exceptions.ResponseError):
            raise reply
    return list(replies)


def _command(conn: ConnectionInterface, *args: Any) -> Any:
    conn.send_command(*args)
    return conn.read_response()


__all__ = ["DirectScripts", "LuaScript"]
