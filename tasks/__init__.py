"""Celery tasks: thin adapters, validate → engine → publish.

A task exists for a kind only when its engine does (``apportion.engine.available_kinds``):
a producer sending ``apportion.auto_attach`` to a worker without that engine gets
Celery's "unregistered task" refusal, not a pretend answer.
"""

from apportion.tasks.jobs import register

__all__ = ["register"]
