"""Shared building blocks of the wire contract (docs/contract.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, TypeGuard

from pydantic import AfterValidator, AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field

from apportion.walk.schema import field_keys


class WireModel(BaseModel):
    """Base of every wire model: immutable, snake_case with camelCase aliases accepted.

    Unknown fields are ignored rather than rejected: producers such as Candlepin send
    whole server objects (href, owner, created …) and a newer producer may send fields
    this version does not know. The envelope warns about each one, with the closest
    known name (apportion.unknown_fields); ``strict: true`` rejects them. Each model
    that must keep extra keys (a partition space's ``mount`` and friends) opts in with
    ``extra="allow"``.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="ignore",
        populate_by_name=True,
        str_strip_whitespace=False,
        allow_inf_nan=False,
    )


def alias(*names: str) -> Any:
    """Accept each of ``names`` on input (snake_case first, then camelCase aliases)."""
    return AliasChoices(*names)


def finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


FiniteFloat = Annotated[float, BeforeValidator(finite)]


MAX_ID_LENGTH = 256


def valid_job_id(value: object) -> TypeGuard[str]:
    """An idempotency key a worker can use as is: 1-256 printable characters.

    It names Redis keys, stream entries and log lines: control characters would forge
    log lines, lone surrogates cannot be written back as JSON (the job would get no
    answer at all).
    """
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_LENGTH and value.isprintable()


def _printable(value: str) -> str:
    if not value.isprintable():
        raise ValueError(
            "must be printable text (no control characters, line breaks or lone surrogates)"
        )
    return value


# job_id (and a launch_outcome's event_id): the idempotency key. A job whose key is not
# valid is answered under a generated one (the task id), the rejection saying why.
JobId = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH), AfterValidator(_printable)]


class JobBase(WireModel):
    """Fields every job has. ``job_id`` is the idempotency key (defaults to the task id)."""

    job_id: JobId | None = None
    # Unknown fields are warned about in the envelope; a strict job is rejected instead
    # (apportion.unknown_fields).
    strict: bool = Field(
        default=False, description="reject the job (unknown_field) if it has unknown fields"
    )


# Schemas that wrap one inner schema without adding a location of their own.
_WRAPPERS = frozenset(
    ("model", "nullable", "default", "function-before", "function-after", "function-wrap")
)


def written_loc(schema: Mapping[str, Any], loc: Sequence[str | int]) -> list[str | int]:
    """The location a user wrote for a pydantic error at ``loc`` of ``schema`` (a core schema).

    pydantic puts a union's branch into an error's location: the type of a plain union
    (``best_with_disks.str``, ``best_with_disks.list[str]``) and the tag of a tagged one
    (``policy[1].failure_penalty.percent``). The user wrote neither, so both are dropped,
    found by following ``loc`` through the schema. Where the schema cannot be followed
    (a plain validator, a branch after a plain union), the rest is kept as it is.
    """
    definitions: dict[str, Mapping[str, Any]] = {}
    out: list[str | int] = []
    rest = list(loc)
    node: Mapping[str, Any] | None = schema
    while rest and node is not None:
        kind = node["type"]
        if kind == "definitions":
            definitions.update((d["ref"], d) for d in node["definitions"])
            node = node["schema"]
        elif kind == "definition-ref":
            node = definitions.get(node["schema_ref"])
        elif kind in _WRAPPERS:
            node = node["schema"]
        elif kind in ("model-fields", "typed-dict"):
            part = rest.pop(0)
            out.append(part)
            fields = node["fields"]
            node = next(
                (f["schema"] for name, f in fields.items() if part in field_keys(name, f)),
                None,
            )
        elif kind in ("list", "set", "frozenset"):
            out.append(rest.pop(0))
            node = node.get("items_schema")
        elif kind == "dict":
            out.append(rest.pop(0))
            # "[key]" follows a key that failed: what follows is no value's location
            node = None if rest[:1] == ["[key]"] else node.get("values_schema")
        elif kind == "tagged-union":
            node = node["choices"].get(rest.pop(0))
        elif kind == "union":
            rest.pop(0)  # the branch: which one failed is in the message
            node = None
        else:
            node = None
    return out + rest
