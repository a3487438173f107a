"""Service configuration: settings from the environment, Celery configuration, default policy."""

from apportion.config.settings import Settings, TimeLimit, get_settings

__all__ = ["Settings", "TimeLimit", "get_settings"]
