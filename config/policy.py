"""The default launch-selection policy (config/default_policy.yaml) and the engine context."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from apportion.config.settings import Settings
from apportion.engine import Context
from apportion.errors import Rejected
from apportion.limits import DEFAULT_LIMITS
from apportion.selection.policy import check_policy, parse_policy

DEFAULT_POLICY_FILE = Path(__file__).with_name("default_policy.yaml")


@lru_cache(maxsize=8)
def load_default_policy(path: str | None = None) -> tuple[dict[str, Any], ...] | None:
    """The policy a launch_select job without a ``policy`` key gets (None if no file)."""
    file = Path(path) if path else DEFAULT_POLICY_FILE
    if not file.exists():
        return None
    data = yaml.safe_load(file.read_text())
    modules = data.get("policy") if isinstance(data, dict) else data
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise ValueError(f"{file}: expected a list of policy modules")
    # A broken default policy must stop the worker at boot, not reject every job later.
    try:
        check_policy(parse_policy(modules, path=str(file)), DEFAULT_LIMITS)
    except Rejected as exc:
        raise ValueError(f"invalid default policy: {exc.message}") from exc
    return tuple(modules)


def engine_context(settings: Settings, now: datetime | None = None) -> Context:
    """The engine context a worker or the CLI gives every job."""
    return Context(
        limits=settings.limits,
        now=now or datetime.now(UTC),
        default_policy=load_default_policy(settings.default_policy_file),
    )
