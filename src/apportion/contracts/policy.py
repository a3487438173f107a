"""Selection policy modules (SPEC.md §2.3, provider-selection.txt).

A policy is a list of modules applied in order, each ``{"module": NAME, …params}``.
The first must be a base distribution (``equal`` or ``least_used``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from apportion.contracts.base import FiniteFloat, WireModel


class EqualModule(WireModel):
    module: Literal["equal"]


class LeastUsedModule(WireModel):
    """Favour accounts whose providers are least utilised for the requested classes."""

    module: Literal["least_used"]


class WeightsModule(WireModel):
    """Multiply by account ``weight`` (or the ``weights`` map given here)."""

    module: Literal["weights"]
    weights: dict[str, FiniteFloat] | None = None


class PriorityModule(WireModel):
    module: Literal["priority"]
    mode: Literal["strict", "probabilistic"] = "strict"
    strength: FiniteFloat = Field(0.5, ge=0)


class FailurePenaltyModule(WireModel):
    module: Literal["failure_penalty"]
    percent: FiniteFloat = Field(5.0, ge=0, le=100)
    window_hours: FiniteFloat = Field(6.0, gt=0, le=24 * 365)
    hard_limit: int | None = Field(None, ge=1)


class CostModule(WireModel):
    module: Literal["cost"]
    mode: Literal["strict", "probabilistic"] = "strict"
    amount: FiniteFloat = Field(0.5, ge=0)


class ExpressionModule(WireModel):
    """An administrator's module: a yaql expression giving a factor ≥ 0 per account."""

    module: Literal["expression"]
    expression: str = Field(min_length=1)
    name: str | None = None


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
