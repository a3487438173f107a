"""Build the studio from settings and serve it with uvicorn (``apportion studio``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

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
    max_upload_bytes: int,
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
        max_upload_bytes=max_upload_bytes,
        recent_jobs=recent.jobs,
        failures=failure_counts,
        public_origin=origin,
    )
    return Studio(config, policy_store(settings, client))


def serve(studio: Studio, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(create_app(studio), host=host, port=port, log_level="info", server_header=False)
