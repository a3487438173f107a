"""Celery tasks: thin adapters, validate → engine → hooks → publish.

One task per job kind in the registry (:mod:`apportion.kinds`), named
``apportion.<kind>``, with its queue's time limits.
"""

from apportion.tasks.jobs import register

__all__ = ["register"]
