"""Every ``APPORTION_*`` name the project reads, and the check that refuses the others.

A misspelt setting must not fall back to its default: the worker's settings
(config/settings.py) and the engine's (engine_settings.py, read by ``apportion solve``
and ``explain``) both refuse an ``APPORTION_*`` variable that is no known name, naming
the closest one. Both accept the same names, so an environment a worker starts with is
valid for ``apportion solve`` too.

The engine's settings are read off their model. The worker's own ones are named here
(:data:`SERVICE_SETTINGS`), because the engine side must know them without importing the
service packages; tests/unit/service/test_connection_settings.py checks that they are
exactly the fields the worker's model adds.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel

from apportion import kinds

PREFIX = "APPORTION_"

# APPORTION_* variables the project reads outside the settings (before they exist, or
# in its test and benchmark harnesses).
READ_ELSEWHERE: dict[str, str] = {
    "APPORTION_STUDIO_TOKEN": "apportion studio: the token its API requires (cli/studio.py)",
    "APPORTION_STUDIO_PUBLIC_ORIGIN": "apportion studio: its address behind a reverse proxy "
    "(cli/studio.py)",
    "APPORTION_UPDATE_SCREENSHOTS": "tests: the studio browser test rewrites docs/img/studio.png",
    "APPORTION_REQUIRE_REDIS": "tests: a missing redis-server fails instead of skipping",
    "APPORTION_GOLDEN_RECORD": "tests: record every job an engine answers (tests/support)",
    "APPORTION_TEST_SLOW_SOLVE": "tests: the fault-injection worker's slow engine",
    "APPORTION_TEST_SLOW_STORE": "tests: the fault-injection worker's slow store",
    "APPORTION_TEST_LOOP_WATCH": "tests: the fault-injection worker logs its loop's stalls",
}


@dataclass(frozen=True)
class Setting:
    """Which ``__`` names below its own a setting reads.

    ``fields`` alone: a model's (``APPORTION_LIMITS__MAX_POOLS``). ``mapping``: any key
    (``APPORTION_SIMULATED_FAILURE_RATES__EC2``); with ``fields`` too, the keys are queues
    and each has those fields (``APPORTION_TIME_LIMITS__PARTITION__HARD``).
    """

    fields: tuple[str, ...] = ()
    mapping: bool = False


PLAIN = Setting()

# The settings a worker reads beyond the engine's (config/settings.py, Settings).
SERVICE_SETTINGS: dict[str, Setting] = {
    "redis_url": PLAIN,
    "redis_socket_timeout": PLAIN,
    "redis_connect_timeout": PLAIN,
    "redis_health_check_interval": PLAIN,
    "redis_keepalive_seconds": PLAIN,
    "broker_url": PLAIN,
    "result_backend": PLAIN,
    "sentinel_master": PLAIN,
    "sentinel_password": PLAIN,
    "visibility_timeout": PLAIN,
    "unacked_restore_interval": PLAIN,
    "time_limits": Setting(fields=("soft", "hard"), mapping=True),
    "result_expires": PLAIN,
    "stream_prefix": PLAIN,
    "stream_maxlen": PLAIN,
    "stream_max_age": PLAIN,
    "dedup_ttl": PLAIN,
    "heal_progress_every": PLAIN,
    "publish_retries": PLAIN,
    "publish_backoff_max": PLAIN,
    "failure_retention_hours": PLAIN,
    "failure_history_max_per_account": PLAIN,
    "launcher": PLAIN,
    "simulated_failure_rates": Setting(mapping=True),
    "launch_attempts": PLAIN,
    "recent_jobs": PLAIN,
    "recent_job_max_bytes": PLAIN,
    "studio_max_upload_bytes": PLAIN,
    "studio_loaded_bytes": PLAIN,
    "studio_uploads_kept": PLAIN,
    "studio_header_timeout": PLAIN,
    "studio_body_timeout": PLAIN,
    "policy_max_versions": PLAIN,
    "policy_max_bytes": PLAIN,
    "max_message_bytes": PLAIN,
    "quarantine_after": PLAIN,
    "max_eta_seconds": PLAIN,
    "dead_letter_maxlen": PLAIN,
    "dead_letter_max_age": PLAIN,
    "dead_letter_copy_bytes": PLAIN,
    "metrics_port": PLAIN,
    "metrics_address": PLAIN,
    "log_format": PLAIN,
    "log_celery_task_lines": PLAIN,
}


def settings_of(model: type[BaseModel]) -> dict[str, Setting]:
    """Each field of a settings model, with the names it reads below its own."""
    out: dict[str, Setting] = {}
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out[name] = Setting(fields=tuple(annotation.model_fields))
        elif typing.get_origin(annotation) is dict:
            value = typing.get_args(annotation)[1]
            fields = (
                tuple(value.model_fields)
                if isinstance(value, type) and issubclass(value, BaseModel)
                else ()
            )
            out[name] = Setting(fields=fields, mapping=True)
        else:
            out[name] = PLAIN
    return out


def known_variables(settings: Mapping[str, Setting]) -> tuple[list[str], list[str]]:
    """(exact names, prefixes): every APPORTION_* name ``settings`` and the project read.

    Under a mapping (``time_limits``, ``simulated_failure_rates``) any key is allowed
    here, and the mapping's own validation names a wrong one (an unknown queue, a field
    not soft/hard); the exact names listed under it are there to be suggested.
    """
    exact: list[str] = list(READ_ELSEWHERE)
    prefixes: list[str] = []
    for name, setting in settings.items():
        env = f"{PREFIX}{name.upper()}"
        exact.append(env)
        if setting.mapping:
            prefixes.append(f"{env}__")
            exact += [
                f"{env}__{queue.upper()}__{sub.upper()}"
                for queue in (kinds.queues() if setting.fields else ())
                for sub in setting.fields
            ]
        else:
            exact += [f"{env}__{sub.upper()}" for sub in setting.fields]
    return exact, prefixes


def unknown_variables(environ: Mapping[str, str], settings: Mapping[str, Setting]) -> list[str]:
    """A message for each APPORTION_* variable in ``environ`` that nothing reads."""
    exact, prefixes = known_variables(settings)
    known = set(exact)
    out = []
    for variable in sorted(environ):
        name = variable.upper()
        if not name.startswith(PREFIX) or name in known or name.startswith(tuple(prefixes)):
            continue
        close = difflib.get_close_matches(name, exact, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else " (docs/settings.md lists them)"
        out.append(f"unknown environment variable {variable}{hint}")
    return out


__all__ = [
    "READ_ELSEWHERE",
    "SERVICE_SETTINGS",
    "Setting",
    "known_variables",
    "settings_of",
    "unknown_variables",
]
