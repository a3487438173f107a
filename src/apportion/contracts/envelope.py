"""The result envelope every job produces.

Plain frozen dataclasses: the envelope is built once per job and becomes JSON once
(:mod:`apportion.codec`); its JSON Schema is generated from these definitions by
pydantic (``apportion schema KIND --result``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field

Status = Literal["ok", "infeasible", "rejected"]


@dataclass(frozen=True, slots=True)
class ErrorDetail:
    path: Annotated[str, Field(description="JSON path of the offending field, e.g. schema[2].size")]
    message: str


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    code: Annotated[str, Field(description="machine-readable reason, e.g. too_large")]
    message: str
    details: Sequence[ErrorDetail] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "details": [{"path": d.path, "message": d.message} for d in self.details],
        }


@dataclass(frozen=True, slots=True)
class WarningDetail:
    path: Annotated[str, Field(description="JSON path of the field, e.g. schema[3].best_with_disk")]
    code: Annotated[str, Field(description="machine-readable reason, e.g. unknown_field")]
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    """``{"job_id", "kind", "status", "result", "error", "warnings"?, "engine_version",
    "elapsed_ms"}``.

    ``result`` is set exactly when ``status`` is ``ok``; ``error`` otherwise.
    ``warnings`` (an extension of the contract: unknown fields the job carried) is
    written only when there is at least one, so envelopes without any are unchanged.
    """

    job_id: str | None
    kind: str
    status: Status
    result: dict[str, Any] | None = None
    error: ErrorInfo | None = None
    warnings: Annotated[
        Sequence[WarningDetail],
        Field(description="things in the job that were ignored; absent when there are none"),
    ] = ()
    engine_version: str
    elapsed_ms: float

    @classmethod
    def rejected(
        cls, job_id: str | None, kind: str, error: ErrorInfo, *, elapsed_ms: float = 0.0
    ) -> Envelope:
        """A ``rejected`` answer decided outside the engine (a time limit, the gate, a
        reused job_id, an envelope over its size limit, a message that is not a job)."""
        from apportion import ENGINE_VERSION

        return cls(
            job_id=job_id,
            kind=kind,
            status="rejected",
            error=error,
            engine_version=ENGINE_VERSION,
            elapsed_ms=elapsed_ms,
        )

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_dict(self) -> dict[str, Any]:
        """The envelope as plain JSON data, in the contract's field order."""
        out: dict[str, Any] = {
            "job_id": self.job_id,
            "kind": self.kind,
            "status": self.status,
            "result": self.result,
            "error": None if self.error is None else self.error.as_dict(),
        }
        if self.warnings:
            out["warnings"] = [
                {"path": w.path, "code": w.code, "message": w.message} for w in self.warnings
            ]
        out["engine_version"] = self.engine_version
        out["elapsed_ms"] = self.elapsed_ms
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Envelope:
        """An envelope read back from JSON (a stream entry, a result backend value)."""
        error = data.get("error")
        return cls(
            job_id=data.get("job_id"),
            kind=data["kind"],
            status=data["status"],
            result=data.get("result"),
            error=None
            if error is None
            else ErrorInfo(
                code=error["code"],
                message=error["message"],
                details=tuple(ErrorDetail(**d) for d in error.get("details", ())),
            ),
            warnings=tuple(WarningDetail(**w) for w in data.get("warnings") or ()),
            engine_version=data.get("engine_version", ""),
            elapsed_ms=data.get("elapsed_ms", 0.0),
        )
