"""The redis-py client used by apportion's own stores (not by Celery's transport).

Every connection apportion makes itself (stores, publisher, ``apportion events``,
``health`` and ``metrics``) is made by :func:`make_redis`, so a new kind of URL (a
Sentinel one, TLS options) is supported in one place.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

import redis
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel

from apportion.config.settings import Settings, get_settings, url_scheme

# redis-py errors that mean "the server is unreachable right now": transient, retried.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
    redis.exceptions.TryAgainError,
    ConnectionResetError,
)

# Everything a Redis call can raise; :func:`is_outage` says which of these are outages.
REDIS_ERRORS: tuple[type[Exception], ...] = (redis.RedisError, OSError)

# Error replies by which a reachable server says it cannot serve now, whatever was
# asked: out of memory under maxmemory (OOM), persistence failing (MISCONF), a replica
# reached at a master's address after a failover (READONLY), a replica without its
# master (MASTERDOWN), too few replicas for min-replicas-to-write (NOREPLICAS), a
# dataset loading (LOADING), a script still running (BUSY), a cluster resharding
# (TRYAGAIN). The same command succeeds once the operator or the failover fixes the
# server, so a job meeting one waits (its task retries) rather than being answered.
# NOSCRIPT is among them: the scripts' callers reload on it, and one still escaping
# means the cache was flushed between the load and the call, which the next attempt
# repairs. Every other reply (wrong arguments, WRONGTYPE, a Lua error) is our own bug
# or a key someone else wrote: the same call fails the same way every time, so it is
# not retried (a retry loop would requeue the job for ever) and surfaces as an error.
OUTAGE_REPLIES = frozenset(
    {"OOM", "MISCONF", "READONLY", "MASTERDOWN", "NOREPLICAS", "LOADING", "BUSY", "TRYAGAIN"}
)
_OUTAGE_REPLY_ERRORS: tuple[type[Exception], ...] = (
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.MasterDownError,
    redis.exceptions.NoScriptError,
)


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` (from a Redis call) means "Redis cannot serve now": transient, to
    be raised as StoreUnavailable and retried; anything else is not (see OUTAGE_REPLIES).

    redis-py strips the code of the replies it has a class for (OOM, READONLY, ...) and
    keeps it as the message's first word for the others (MISCONF, NOREPLICAS, BUSY).
    """
    if isinstance(exc, TRANSIENT_ERRORS + _OUTAGE_REPLY_ERRORS):
        return True
    if isinstance(exc, redis.ResponseError):
        return str(exc).split(" ", 1)[0] in OUTAGE_REPLIES
    # A socket error redis-py did not wrap (a reset, a refused TLS handshake).
    return isinstance(exc, OSError)


# What each refusal means to an operator (the reply's code → words).
_REFUSAL_WORDS = {
    "OOM": "out of memory (used memory is over maxmemory, and the policy evicts nothing)",
    "MISCONF": "it cannot persist to disk (MISCONF: stop-writes-on-bgsave-error)",
    "READONLY": "it is a read-only replica",
    "MASTERDOWN": "it is a replica that lost its master",
    "NOREPLICAS": "too few replicas for min-replicas-to-write",
    "LOADING": "it is still loading its dataset",
    "BUSY": "a script is running",
    "TRYAGAIN": "a cluster slot is being moved",
}
_REFUSAL_CLASSES: tuple[tuple[type[Exception], str], ...] = (
    (redis.exceptions.OutOfMemoryError, "OOM"),
    (redis.exceptions.ReadOnlyError, "READONLY"),
    (redis.exceptions.MasterDownError, "MASTERDOWN"),
    (redis.BusyLoadingError, "LOADING"),
)


def refusal(exc: BaseException | None) -> str | None:
    """Why Redis refused, when ``exc`` (or an exception it was raised from, as kombu and
    Celery wrap redis-py's) is a reply by which a reachable Redis cannot serve now;
    None for anything else (unreachable, or a reply that is not an outage)."""
    seen = 0
    while exc is not None and seen < 8:
        for cls, code in _REFUSAL_CLASSES:
            if isinstance(exc, cls):
                return _REFUSAL_WORDS[code]
        if isinstance(exc, redis.ResponseError):
            code = str(exc).split(" ", 1)[0]
            if code in _REFUSAL_WORDS:
                return _REFUSAL_WORDS[code]
            if "used memory > 'maxmemory'" in str(exc):  # a pipeline's wrapped reply
                return _REFUSAL_WORDS["OOM"]
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def make_redis(
    url: str,
    *,
    timeout: float = 5.0,
    retries: int = 6,
    sentinel_master: str | None = None,
    sentinel_password: str | None = None,
    health_check_interval: int = 10,
    keepalive_options: dict[int, int] | None = None,
) -> redis.Redis:
    """A client for ``url``. ``timeout`` bounds connecting and each reply; ``retries``
    reconnect attempts inside one call (0 for a quick check such as ``apportion health``).

    A ``sentinel://h1:26379/0;sentinel://h2:26379`` URL gives a client of the master
    ``sentinel_master``: each new connection asks the sentinels where the master is,
    so after a failover the next reconnection reaches the new one.
    """
    options: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "health_check_interval": health_check_interval,
        "socket_keepalive": True,
        "socket_keepalive_options": keepalive_options or {},
        # Reconnects inside one call for ~2.5 s (0.1, 0.2, 0.4, 0.8, 1, 1 s), which
        # rides out a Redis restart or a Sentinel failover without re-running the job;
        # longer outages surface as StoreUnavailable and the task retries with its own
        # backoff.
        "retry": Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=retries),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
    }
    if url_scheme(url) == "sentinel":
        return _sentinel_client(url, sentinel_master, sentinel_password, options)
    return redis.Redis.from_url(url, **options)


def _sentinel_client(
    url: str, master: str | None, sentinel_password: str | None, options: dict[str, Any]
) -> redis.Redis:
    if not master:
        raise ValueError(f"{redact_url(url)}: a Sentinel URL needs APPORTION_SENTINEL_MASTER")
    nodes: list[tuple[str, int]] = []
    first: SplitResult | None = None
    for part in url.split(";"):
        parts = urlsplit(part.strip())
        nodes.append((parts.hostname or "127.0.0.1", parts.port or 26379))
        first = first or parts
    assert first is not None
    db = first.path.strip("/")
    sentinel = Sentinel(
        nodes,
        # The sentinels answer quickly or not at all: the same timeouts, no retries
        # (redis-py asks the next sentinel).
        sentinel_kwargs={
            "socket_timeout": options["socket_timeout"],
            "socket_connect_timeout": options["socket_connect_timeout"],
            "password": sentinel_password,
            "retry": Retry(NoBackoff(), 0),
        },
    )
    client: redis.Redis = sentinel.master_for(
        master,
        username=unquote(first.username) if first.username else None,
        password=unquote(first.password) if first.password else None,
        db=int(db) if db else 0,
        **options,
    )
    return client


# The client type for modules outside workers/ (the CLI's actions), which name no broker
# library themselves.
Client = redis.Redis


def client_for(
    settings: Settings, *, timeout: float | None = None, retries: int = 6
) -> redis.Redis:
    """A client for the settings' ``redis_url`` (Sentinel options included);
    ``timeout`` defaults to the settings' reply timeout (Settings.reply_timeout)."""
    return make_redis(
        settings.redis_url,
        timeout=settings.reply_timeout if timeout is None else timeout,
        retries=retries,
        sentinel_master=settings.sentinel_master,
        sentinel_password=settings.sentinel_secret,
        health_check_interval=settings.redis_health_check_interval,
        keepalive_options=settings.keepalive_options(),
    )


@lru_cache(maxsize=4)
def _cached(
    url: str,
    master: str | None,
    sentinel_password: str | None,
    timeout: float,
    health_check_interval: int,
    keepalive: tuple[tuple[int, int], ...],
) -> redis.Redis:
    return make_redis(
        url,
        timeout=timeout,
        sentinel_master=master,
        sentinel_password=sentinel_password,
        health_check_interval=health_check_interval,
        keepalive_options=dict(keepalive),
    )


def get_redis(settings: Settings | None = None) -> redis.Redis:
    s = settings or get_settings()
    return _cached(
        s.redis_url,
        s.sentinel_master,
        s.sentinel_secret,
        s.reply_timeout,
        s.redis_health_check_interval,
        tuple(sorted(s.keepalive_options().items())),
    )


def error_text(exc: BaseException) -> str:
    """One line saying why Redis could not be reached, for messages.

    redis-py's "No master found" lists the repr of a client per sentinel (hundreds of
    characters each); the reason is its first part.
    """
    text = " ".join(str(exc).split()) or type(exc).__name__
    if "No master found" in text:
        head = text.split(" : ", 1)[0]
        # What each sentinel answered, as redis-py tags it ("network:ConnectionError",
        # "auth:AuthenticationError": the sentinels want APPORTION_SENTINEL_PASSWORD).
        answers = sorted(set(re.findall(r"> - (\w+:\w+)", text)))
        detail = f" ({', '.join(answers)})" if answers else ""
        return f"{head}: no sentinel answered with a reachable master{detail}"
    return text


def redact_url(url: str) -> str:
    """``url`` with every password replaced by ``***``: for messages and logs.

    Each part of a Sentinel list (``sentinel://:pw@h1;sentinel://:pw@h2``) and a
    ``password`` query parameter are masked too.
    """
    return ";".join(_redact_one(part) for part in url.split(";"))


def _redact_one(url: str) -> str:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "<unparsable URL>"
    query = "&".join(
        f"{key}=***" if key.lower() == "password" else f"{key}{sep}{value}"
        for key, sep, value in (item.partition("=") for item in parts.query.split("&") if item)
    )
    parts = parts._replace(query=query)
    if parts.password is not None:
        user = parts.username or ""
        host = parts.hostname or ""
        if ":" in host:  # an IPv6 address
            host = f"[{host}]"
        if port is not None:
            host = f"{host}:{port}"
        parts = parts._replace(netloc=f"{user}:***@{host}")
    return urlunsplit(parts)
