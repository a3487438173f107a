"""The redis-py client used by apportion's own stores (not by Celery's transport)."""

from __future__ import annotations

from functools import lru_cache

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from apportion.config.settings import Settings, get_settings

# redis-py errors that mean "the server is unreachable right now": transient, retried.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
    redis.exceptions.TryAgainError,
    ConnectionResetError,
)


def make_redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(
        url,
        socket_timeout=5,
        socket_connect_timeout=5,
        health_check_interval=30,
        # Reconnects inside one call for ~2.5 s (0.1, 0.2, 0.4, 0.8, 1, 1 s), which
        # rides out a Redis restart without re-running the job; longer outages
        # surface as StoreUnavailable and the task retries with its own backoff.
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=6),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError],
    )


@lru_cache(maxsize=4)
def _cached(url: str) -> redis.Redis:
    return make_redis(url)


def get_redis(settings: Settings | None = None) -> redis.Redis:
    return _cached((settings or get_settings()).redis_url)
