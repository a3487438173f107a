"""What a task needs besides the job, behind one injectable seam.

Tasks ask :func:`get_runtime` for their publisher, stores and engine context. The
real worker builds them from settings on first use (so importing tasks never
connects to Redis); the embedded demo and tests install their own with
:func:`set_runtime`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from apportion.engine import Context
from config.policy import engine_context
from config.settings import Settings, get_settings
from workers.keys import Keys
from workers.publisher import ResultPublisher, StreamPublisher
from workers.redis_client import get_redis


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    publisher: ResultPublisher
    keys: Keys = field(default_factory=Keys)

    def context(self) -> Context:
        return engine_context(self.settings)


def build_runtime(settings: Settings) -> Runtime:
    keys = Keys(settings.stream_prefix)
    publisher = StreamPublisher(
        get_redis(settings), keys, maxlen=settings.stream_maxlen, dedup_ttl=settings.dedup_ttl
    )
    return Runtime(settings=settings, publisher=publisher, keys=keys)


_lock = threading.Lock()
_runtime: Runtime | None = None


def get_runtime() -> Runtime:
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = build_runtime(get_settings())
        return _runtime


def set_runtime(runtime: Runtime | None) -> None:
    """Install ``runtime`` for this process (``None`` → rebuild from settings on next use)."""
    global _runtime
    with _lock:
        _runtime = runtime
