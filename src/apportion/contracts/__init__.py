"""The wire contract: pydantic models of every job, result and event (SPEC.md §2).

Producers in other services and acceptance checks depend on these shapes:
change them only by extending.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, TypeAdapter

from apportion.contracts.attach import (
    AutoAttachJob,
    AutoAttachResult,
    GuestHostAttachJob,
    GuestHostAttachResult,
)
from apportion.contracts.base import KINDS, JobBase, Kind
from apportion.contracts.envelope import Envelope, ErrorDetail, ErrorInfo, Status
from apportion.contracts.events import LaunchOutcomeJob, LaunchOutcomeResult
from apportion.contracts.launch import LaunchSelectJob, LaunchSelectResult
from apportion.contracts.partition import PartitionJob, PartitionResult

JOB_MODELS: dict[Kind, type[JobBase]] = {
    "auto_attach": AutoAttachJob,
    "guest_host_attach": GuestHostAttachJob,
    "launch_select": LaunchSelectJob,
    "partition": PartitionJob,
    "launch_outcome": LaunchOutcomeJob,
}

# A result is a pydantic model or a TypedDict (plain data the engine builds itself).
RESULT_MODELS: dict[Kind, type[BaseModel] | type[Any]] = {
    "auto_attach": AutoAttachResult,
    "guest_host_attach": GuestHostAttachResult,
    "launch_select": LaunchSelectResult,
    "partition": PartitionResult,
    "launch_outcome": LaunchOutcomeResult,
}


def job_schema(kind: Kind) -> dict[str, Any]:
    """JSON Schema of the job ``kind`` accepts (what producers send)."""
    return JOB_MODELS[kind].model_json_schema(mode="validation", by_alias=True)


def result_schema(kind: Kind) -> dict[str, Any]:
    """JSON Schema of the envelope for ``kind``, with ``result`` typed for that kind."""
    schema = Envelope.model_json_schema(mode="serialization")
    result = TypeAdapter(RESULT_MODELS[kind]).json_schema(mode="serialization")
    defs = schema.setdefault("$defs", {})
    defs.update(result.pop("$defs", {}))
    defs[RESULT_MODELS[kind].__name__] = result
    schema["properties"]["result"] = {
        "anyOf": [{"$ref": f"#/$defs/{RESULT_MODELS[kind].__name__}"}, {"type": "null"}]
    }
    schema["title"] = f"{kind} result envelope"
    return schema


__all__ = [
    "JOB_MODELS",
    "KINDS",
    "RESULT_MODELS",
    "Envelope",
    "ErrorDetail",
    "ErrorInfo",
    "JobBase",
    "Kind",
    "Status",
    "job_schema",
    "result_schema",
]
