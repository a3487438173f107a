"""The redis-py client used by apportion's own stores (not by Celery's transport).

Every connection apportion makes itself (stores, publisher, ``apportion events``,
``health`` and ``metrics``) is made by :func:`make_redis`, so a new kind of URL (a
Sentinel one, TLS options) is supported in one place.
"""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import urlsplit, urlunsplit

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


def make_redis(url: str, *, timeout: float = 5.0, retries: int = 6) -> redis.Redis:
    """A client for ``url``. ``timeout`` bounds connecting and each reply; ``retries``
    reconnect attempts inside one call (0 for a quick check such as ``apportion health``).
    """
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        health_check_interval=30,
        # Reconnects inside one call for ~2.5 s (0.1, 0.2, 0.4, 0.8, 1, 1 s), which
        # rides out a Redis restart without re-running the job; longer outages
        # surface as StoreUnavailable and the task retries with its own backoff.
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=retries),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError],
    )


@lru_cache(maxsize=4)
def _cached(url: str) -> redis.Redis:
    return make_redis(url)


def get_redis(settings: Settings | None = None) -> redis.Redis:
    return _cached((settings or get_settings()).redis_url)


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``: for messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
