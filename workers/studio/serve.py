"""Build the studio from settings and serve it with uvicorn (``apportion studio``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import h11
from uvicorn import Config, Server
from uvicorn.protocols.http.h11_impl import H11Protocol

from apportion.config.settings import Settings
from apportion.engine_settings import load_default_policy
from apportion.workers.redis.client import get_redis
from apportion.workers.runtime import failure_store, policy_store, recent_jobs
from apportion.workers.studio.app import Studio, StudioConfig, create_app
from apportion.workers.studio.guard import check_bind, check_origin, is_loopback


def build_studio(
    settings: Settings,
    *,
    host: str,
    token: str | None,
    examples: Path | None,
    max_upload_bytes: int | None = None,
    public_origin: str | None = None,
) -> Studio:
    """The studio's state: the worker's policy store, failure history and recent jobs.

    Raises ValueError when ``host`` may not be served with ``token`` (guard.check_bind),
    or ``public_origin`` is not an origin (guard.check_origin).
    """
    check_bind(host, token)
    origin = None if public_origin is None else check_origin(public_origin)
    client = get_redis(settings)
    failures = failure_store(settings, client)
    recent = recent_jobs(settings, client)

    def failure_counts(accounts: Sequence[str], window_hours: float) -> Mapping[str, int]:
        return failures.counts(accounts, window_hours, datetime.now(UTC))

    config = StudioConfig(
        limits=settings.limits,
        token=token,
        loopback_only=is_loopback(host),
        examples=examples,
        config_policy=load_default_policy(settings.default_policy_file),
        max_upload_bytes=max_upload_bytes or settings.studio_max_upload_bytes,
        loaded_bytes=settings.studio_loaded_bytes,
        uploads_kept=settings.studio_uploads_kept,
        body_timeout=settings.studio_body_timeout,
        recent_jobs=recent.jobs,
        failures=failure_counts,
        public_origin=origin,
    )
    return Studio(config, policy_store(settings, client))


class HeaderDeadline(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, closing a connection whose request headers have not
    all arrived ``header_timeout`` seconds after it opened or after its last answer.

    uvicorn bounds an idle keep-alive connection, but not one that trickles its headers
    in (a byte now and then resets nothing else): without this, a slow client holds a
    connection as long as it likes. Built on uvicorn's ``loop``, ``conn`` (h11) and
    ``transport`` attributes (tests/unit/studio/test_studio_timeouts.py is their canary).
    """

    header_timeout = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def server(
    studio: Studio, host: str, port: int, *, header_timeout: float, log_level: str = "info"
) -> Server:
    """A uvicorn server for the studio, with the header deadline of ``header_timeout``."""
    protocol = type("StudioH11", (HeaderDeadline,), {"header_timeout": header_timeout})
    return Server(
        Config(
            create_app(studio),
            host=host,
            port=port,
            log_level=log_level,
            server_header=False,
            http=protocol,
        )
    )


def serve(studio: Studio, host: str, port: int, *, header_timeout: float) -> None:
    server(studio, host, port, header_timeout=header_timeout).run()
