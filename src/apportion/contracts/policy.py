"""Selection policy modules (the provider-selection seed).

A policy is a list of modules applied in order, each ``{"module": NAME, …params}``.
The first must be a base distribution (``equal`` or ``least_used``); the engine
(``apportion.selection``) checks that and every limit, so these models only say what
each parameter means. The formulas live in ``apportion/selection/modules.py``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field

from apportion.contracts.base import FiniteFloat, WireModel
from apportion.errors import Rejected

NonNegative = Annotated[FiniteFloat, Field(ge=0)]

_WEIGHTED = (
    "Multiply the base distribution by each account's `weight`. Default (null): only "
    "when no `weights` module comes later in the stack, so a weight is never counted twice."
)


class EqualModule(WireModel):
    """The same probability for every account (the seed's "round robin" basis)."""

    module: Literal["equal"]
    weighted: bool | None = Field(None, description=_WEIGHTED)


class LeastUsedModule(WireModel):
    """Favour accounts whose providers are least utilised for the requested classes.

    Probability proportional to the account's free share of capacity over the
    resource classes the candidates request.
    """

    module: Literal["least_used"]
    weighted: bool | None = Field(None, description=_WEIGHTED)


class WeightsModule(WireModel):
    """Multiply by account ``weight`` (or the ``weights`` map given here)."""

    module: Literal["weights"]
    weights: dict[str, NonNegative] | None = Field(
        None, description="account → weight; accounts not named keep their account `weight`"
    )


class PriorityModule(WireModel):
    """``strict``: one priority group per distinct priority, highest first (spillover).

    ``probabilistic``: within each group, every step down the ladder of distinct
    priorities divides an account's probability by ``1 + strength``.
    """

    module: Literal["priority"]
    mode: Literal["strict", "probabilistic"] = "strict"
    strength: NonNegative = 0.5


class FailurePenaltyModule(WireModel):
    """Each failure in the window fines the account ``percent`` percentage points."""

    module: Literal["failure_penalty"]
    percent: FiniteFloat = Field(5.0, ge=0, le=100)
    window_hours: FiniteFloat = Field(6.0, gt=0, le=24 * 365)
    hard_limit: int | None = Field(
        None, ge=1, description="accounts with at least this many failures go last-resort"
    )


class CostModule(WireModel):
    """``strict``: priority groups cheapest first. ``probabilistic``: within each
    group the dearest account's probability is divided by ``1 + amount`` relative to
    the cheapest, accounts in between geometrically by where their cost lies.
    """

    module: Literal["cost"]
    mode: Literal["strict", "probabilistic"] = "strict"
    amount: NonNegative = 0.5


class ExpressionModule(WireModel):
    """An administrator's module: a yaql expression giving a factor ≥ 0 per account."""

    module: Literal["expression"]
    expression: str = Field(min_length=1)
    name: str | None = Field(None, max_length=128)


BASE_MODULES: frozenset[str] = frozenset({"equal", "least_used"})
MODULE_NAMES: frozenset[str] = BASE_MODULES | {
    "weights",
    "priority",
    "failure_penalty",
    "cost",
    "expression",
}

PolicyModule = Annotated[
    EqualModule
    | LeastUsedModule
    | WeightsModule
    | PriorityModule
    | FailurePenaltyModule
    | CostModule
    | ExpressionModule,
    Field(discriminator="module"),
]


# Pools of the policy store (docs/operations.md, "The policy store"). A pool name appears
# in Redis keys, log lines and URLs: short, printable, no spaces or slashes.
POOL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
POOL_NAME = re.compile(POOL_NAME_PATTERN)
# The reserved pool holding the global default: the policy of every pool without its own.
DEFAULT_POOL = "default"

PoolName = Annotated[
    str,
    Field(
        pattern=POOL_NAME_PATTERN,
        description="a pool of the policy store: 1-128 characters, letters, digits and _ . : - "
        "(not first); `default` is the global default",
    ),
]


def check_pool(pool: object, path: str = "pool") -> str:
    """``pool`` when it is a valid pool name, else :class:`Rejected` naming ``path``."""
    if not isinstance(pool, str) or POOL_NAME.match(pool) is None:
        shown = repr(pool) if not isinstance(pool, str) or len(pool) <= 60 else "a long name"
        raise Rejected.at(
            path,
            f"{shown} is not a pool name: 1-128 characters, letters, digits and _ . : - "
            f"(not first; pattern {POOL_NAME_PATTERN})",
        )
    return pool


# The errors of a tagged union's tag itself (an unknown or missing module name).
UNION_TAG_ERRORS = frozenset(("union_tag_invalid", "union_tag_not_found"))


def user_loc(loc: Sequence[str | int], error_type: str) -> list[str | int]:
    """The location a user wrote for an error inside a policy list.

    pydantic puts the discriminator's tag into the location of a tagged union
    (``[1, "failure_penalty", "percent"]``); the user wrote ``[1, "percent"]``. An
    unknown or missing module name is reported at ``[i, "module"]``.
    """
    out = list(loc)
    if len(out) >= 2 and isinstance(out[0], int) and out[1] in MODULE_NAMES:
        del out[1]
    if error_type in UNION_TAG_ERRORS:
        out.append("module")
    return out
