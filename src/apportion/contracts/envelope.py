"""The result envelope every job produces (SPEC.md §2)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from apportion.contracts.base import Kind

Status = Literal["ok", "infeasible", "rejected"]


class ErrorDetail(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str = Field(description="JSON path of the offending field, e.g. schema[2].size")
    message: str


class ErrorInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: str
    message: str
    details: list[ErrorDetail] = Field(default_factory=list)


class Envelope(BaseModel):
    """``{"job_id", "kind", "status", "result", "error", "engine_version", "elapsed_ms"}``.

    ``result`` is set exactly when ``status`` is ``ok``; ``error`` otherwise.
    """

    model_config = ConfigDict(frozen=True)

    job_id: str | None
    kind: Kind
    status: Status
    result: dict[str, Any] | None = None
    error: ErrorInfo | None = None
    engine_version: str
    elapsed_ms: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"
