"""What the engine needs from the environment, for callers outside a worker.

``apportion solve``, ``explain`` and the benchmarks answer jobs in-process. They read
the same ``APPORTION_*`` variables as a worker for what changes an answer — the limits,
the default launch policy, a deployment's own job kinds — without importing the
service packages (``apportion.config``, ``apportion.workers``): the worker's settings
(config/settings.py) extend :class:`EngineSettings` with everything else.
"""

from __future__ import annotations

import importlib.util
import os
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from apportion import kinds
from apportion.context import (
    Context,
    FailureCounts,
    PolicyLookup,
    RecordOutcome,
    UnknownFields,
)
from apportion.errors import Rejected
from apportion.limits import DEFAULT_LIMITS, Limits
from apportion.setting_names import SERVICE_SETTINGS, Setting, settings_of, unknown_variables


def _shipped_default_policy() -> Path:
    # The file ships in the apportion.config package; find_spec locates the package
    # without running it.
    spec = importlib.util.find_spec("apportion.config")
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not folders:
        raise ImportError("the apportion.config package is missing from this installation")
    return Path(folders[0]) / "default_policy.yaml"


DEFAULT_POLICY_FILE = _shipped_default_policy()


class EngineSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="APPORTION_",
        env_nested_delimiter="__",
        frozen=True,
        extra="ignore",
        # A validation error must not repeat the values: a URL holds a password.
        hide_input_in_errors=True,
    )

    limits: Limits = Field(
        Limits(),
        description=(
            "Ceilings on everything a job controls, one variable each: `APPORTION_LIMITS__<NAME>` "
            "(below)"
        ),
    )
    default_policy_file: str | None = Field(
        None,
        description=(
            "YAML file of the default launch policy: seeds the policy store's global default at "
            "worker boot, and decides where there is no store (validated at boot). Unset: the "
            "shipped `config/default_policy.yaml`"
        ),
    )
    # launch_select: whether a job's own `policy` list is used. Off: only the policy store
    # (and the default policy file) decide, and a job sending a policy list is rejected
    # (code inline_policy_disabled); `policy: null` (candidates only) is still accepted.
    allow_inline_policy: bool = Field(
        True,
        description=(
            "`false`: only the policy store decides; a launch_select job sending a `policy` list "
            "is rejected (`inline_policy_disabled`)"
        ),
    )
    # Read by `apportion solve` and `explain` as by a worker (so it lives here, with the
    # engine's settings, which the worker's config/settings.py extends): one environment
    # gives the same answer in both.
    unknown_fields: UnknownFields = Field(
        "warn",
        description=(
            "what a job with a field this version does not know gets, unless the job sets "
            "`strict` itself: `warn` (the job runs; each unknown field is a warning in the "
            "envelope, with its path and the closest known name) or `reject` (the job is "
            "`rejected` with code `unknown_field`, naming the path and the closest known "
            "name). A job's own `strict: true` or `strict: false` wins over this default."
        ),
    )
    # Modules that register job kinds of a deployment's own (apportion.kinds.register),
    # imported when the settings are read: APPORTION_KIND_MODULES='["my.kinds"]'.
    kind_modules: list[str] = Field(
        default_factory=list,
        description=(
            'JSON list of modules that register a deployment\'s own job kinds (`["my.kinds"]`)'
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _no_unknown_variables(cls, data: Any) -> Any:
        # A worker's settings (a subclass) inherit this check; both accept every name
        # either reads, so one environment serves a worker and `apportion solve` alike.
        unknown = unknown_variables(os.environ, known_settings())
        if unknown:
            raise ValueError("; ".join(unknown))
        return data

    @model_validator(mode="after")
    def _load_kind_modules(self) -> EngineSettings:
        kinds.load_modules(self.kind_modules)
        return self


def known_settings() -> dict[str, Setting]:
    """Every setting a worker or the engine reads, with the names each reads below its own."""
    return {**settings_of(EngineSettings), **SERVICE_SETTINGS}


@lru_cache(maxsize=8)
def load_default_policy(path: str | None = None) -> tuple[dict[str, Any], ...] | None:
    """The policy a launch_select job without a ``policy`` key gets (None if no file)."""
    from apportion.selection.policy import check_policy, parse_policy

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


def engine_context(
    settings: EngineSettings,
    now: datetime | None = None,
    *,
    policy_lookup: PolicyLookup | None = None,
    failure_counts: FailureCounts | None = None,
    record_outcome: RecordOutcome | None = None,
) -> Context:
    """The engine context a worker or the CLI gives every job; a worker passes in its
    stores (workers/runtime.py), built into the one context, as a worker does per job."""
    return Context(
        limits=settings.limits,
        now=now or datetime.now(UTC),
        default_policy=load_default_policy(settings.default_policy_file),
        allow_inline_policy=settings.allow_inline_policy,
        unknown_fields=settings.unknown_fields,
        policy_lookup=policy_lookup,
        failure_counts=failure_counts,
        record_outcome=record_outcome,
    )


__all__ = [
    "DEFAULT_POLICY_FILE",
    "EngineSettings",
    "engine_context",
    "known_settings",
    "load_default_policy",
]
