"""JSON Schemas of every job and envelope, generated from the registry's types."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, TypeAdapter

from apportion.contracts.envelope import Envelope
from apportion.kinds import get, names


def _schema(type_: Any, mode: str) -> dict[str, Any]:
    if isinstance(type_, type) and issubclass(type_, BaseModel):
        return type_.model_json_schema(mode=mode, by_alias=mode == "validation")  # type: ignore[arg-type]
    return TypeAdapter(type_).json_schema(mode=mode, by_alias=mode == "validation")  # type: ignore[arg-type]


def job_schema(kind: str) -> dict[str, Any]:
    """JSON Schema of the job ``kind`` accepts (what producers send)."""
    return _schema(get(kind).job, "validation")


def result_schema(kind: str) -> dict[str, Any]:
    """JSON Schema of the envelope for ``kind``, with ``result`` typed for that kind."""
    spec = get(kind)
    schema = _schema(Envelope, "serialization")
    result = _schema(spec.result, "serialization")
    name = result.get("title") or getattr(spec.result, "__name__", "Result")
    defs = schema.setdefault("$defs", {})
    defs.update(result.pop("$defs", {}))
    defs[name] = result
    properties = schema["properties"]
    properties["kind"] = {"const": kind, "title": "Kind", "type": "string"}
    properties["result"] = {"anyOf": [{"$ref": f"#/$defs/{name}"}, {"type": "null"}]}
    schema["title"] = f"{kind} result envelope"
    return schema


def schema_files() -> dict[str, bytes]:
    """``<kind>.json`` (the job) and ``<kind>.result.json`` (its envelope) for every kind,
    as written to docs/schemas/ (indented, one trailing newline)."""
    from apportion.codec import encode

    out: dict[str, bytes] = {}
    for kind in names():
        out[f"{kind}.json"] = encode(job_schema(kind), pretty=True) + b"\n"
        out[f"{kind}.result.json"] = encode(result_schema(kind), pretty=True) + b"\n"
    return out


__all__ = ["job_schema", "result_schema", "schema_files"]
