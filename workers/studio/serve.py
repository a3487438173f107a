"""Build the studio from settings and serve it with uvicorn (``apportion studio``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from apportion.config.settings import Settings
from apportion.engine_settings import load_default_policy
from apportion.workers.history.failure_store import FailureStore
from apportion.workers.redis.client import get_redis
from apportion.workers.redis.keys import Keys
from apportion.workers.runtime import policy_store
from apportion.workers.studio.app import Studio, StudioConfig, create_app
from apportion.workers.studio.guard import check_bind, is_loopback
from apportion.workers.studio.recent import RecentJobs


def build_studio(
    settings: Settings,
    *,
    host: str,
    token: str | None,
    examples: Path | None,
    max_upload_bytes: int,
) -> Studio:
    """The studio's state: the worker's policy store, failure history and recent jobs.

    Raises ValueError when ``host`` may not be served with ``token`` (guard.check_bind).
    """
    check_bind(host, token)
    client = get_redis(settings)
    keys = Keys(settings.stream_prefix)
    failures = FailureStore(
        client,
        keys,
        retention_seconds=int(settings.failure_retention_hours * 3600),
        stream_maxlen=settings.stream_maxlen,
        stream_max_age=settings.stream_max_age,
        max_per_account=settings.failure_history_max_per_account,
    )
    recent = RecentJobs(
        client,
        keys,
        keep=settings.recent_jobs,
        max_bytes=settings.recent_job_max_bytes,
        ttl_seconds=settings.stream_max_age,
    )

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
    )
    return Studio(config, policy_store(settings, client))


def serve(studio: Studio, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(create_app(studio), host=host, port=port, log_level="info", server_header=False)
