"""Service configuration: settings from the environment, Celery configuration, default policy."""

from apportion.config.settings import QUEUES, Queue, Settings, TimeLimit, TimeLimits, get_settings

__all__ = ["QUEUES", "Queue", "Settings", "TimeLimit", "TimeLimits", "get_settings"]
