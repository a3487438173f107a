"""The job-kind registry: one :class:`JobKind` per kind, everything else reads it.

Tasks and their routes, queues and time limits, the CLI's choices, the JSON Schemas,
the docs, the demo and ``apportion explain`` are generated from :data:`REGISTRY`. A
deployment adds a kind of its own with a module that calls :func:`register` at import,
named in ``APPORTION_KIND_MODULES`` (loaded by :func:`load_modules` in the worker and
the CLI).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from apportion.kinds.builtin import BUILTIN
from apportion.kinds.spec import JobKind, load

REGISTRY: dict[str, JobKind] = {kind.name: kind for kind in BUILTIN}


class UnknownKind(ValueError):
    """The kind is not registered."""


def get(name: str) -> JobKind:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownKind(f"unknown job kind {name!r}; kinds are {', '.join(REGISTRY)}") from None


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def queues() -> tuple[str, ...]:
    """Every queue some kind runs on, in registry order."""
    return tuple(dict.fromkeys(kind.queue for kind in REGISTRY.values()))


def kinds_on(queue: str) -> tuple[JobKind, ...]:
    return tuple(kind for kind in REGISTRY.values() if kind.queue == queue)


def register(kind: JobKind) -> JobKind:
    """Add ``kind``; registering the same record twice is harmless, a clash is refused."""
    known = REGISTRY.get(kind.name)
    if known is not None and known != kind:
        raise ValueError(f"job kind {kind.name!r} is already registered differently")
    REGISTRY[kind.name] = kind
    return kind


def load_modules(modules: Iterable[str]) -> None:
    """Import each module (``APPORTION_KIND_MODULES``); they register their kinds."""
    for module in modules:
        importlib.import_module(module)


__all__ = [
    "REGISTRY",
    "JobKind",
    "UnknownKind",
    "get",
    "kinds_on",
    "load",
    "load_modules",
    "names",
    "queues",
    "register",
]
