"""Record every job an engine answers during a test run, and replay them later.

Refactors of the engines and of the envelope must not change a single answer. This
tool makes that checkable over far more jobs than the examples: it records each call
that reaches an engine while the test suite runs (through ``apportion.engine.run`` or
straight into an engine's ``solve``), with the context that decides the answer (the
clock, the limits, the default policy and the failure counts the engine asked for),
and replays them against the current code::

    APPORTION_GOLDEN_RECORD=/tmp/golden .venv/bin/pytest tests/unit tests/contract -p no:randomly
    .venv/bin/python -m tests.support.golden check /tmp/golden [--kind partition] [--show 5]

A replay compares the JSON value of each answer (timing fields aside). Answers a change
is meant to alter (an issue's new rule) show up as differences to be explained, never
silently accepted.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import pickle
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from apportion import kinds

TIMING_FIELDS = frozenset({"elapsed_ms"})

# The solve functions tests may call directly, by the kind they answer: every registered
# kind but launch_outcome, whose answer depends on the failure history in Redis, which a
# replay cannot hold.
SOLVERS: dict[str, tuple[str, str]] = {
    name: (kinds.get(name).solver.partition(":")[0], kinds.get(name).solver.partition(":")[2])
    for name in kinds.names()
    if name != "launch_outcome"
}


def _plain(value: Any) -> Any:
    """A result as JSON builtins, whatever the engine returned (model, dict)."""
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json")
    as_dict = getattr(value, "as_dict", None)  # an Envelope
    if as_dict is not None:
        value = as_dict()
    return json.loads(json.dumps(value, default=str))


def _strip_timing(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_timing(v) for k, v in value.items() if k not in TIMING_FIELDS}
    if isinstance(value, list):
        return [_strip_timing(v) for v in value]
    return value


def _recording_counts(
    calls: list[tuple[tuple[str, ...], float, dict[str, int]]], inner: Callable[..., Any]
) -> Callable[..., Any]:
    def counts(accounts: Sequence[str], window_hours: float) -> Mapping[str, int]:
        answer = dict(inner(accounts, window_hours))
        calls.append((tuple(accounts), window_hours, answer))
        return answer

    return counts


def _replaying_counts(calls: list[tuple[tuple[str, ...], float, dict[str, int]]]) -> Any:
    table = {(accounts, window): answer for accounts, window, answer in calls}

    def counts(accounts: Sequence[str], window_hours: float) -> Mapping[str, int]:
        return table.get((tuple(accounts), window_hours), {})

    return counts


class Recorder:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def _ctx_fields(self, ctx: Any, calls: list[Any]) -> dict[str, Any]:
        return {
            "limits": ctx.limits.model_dump(),
            "now": ctx.now,
            "default_policy": ctx.default_policy,
            "has_counts": ctx.failure_counts is not None,
            "counts": calls,
        }

    def save(self, record: dict[str, Any]) -> None:
        blob = pickle.dumps(record)
        name = hashlib.sha1(blob).hexdigest()[:20]
        (self.folder / f"{record['kind']}-{record['via']}-{name}.pkl").write_bytes(blob)

    def install(self) -> None:
        import importlib

        from apportion import engine

        original_run = engine.run
        recorder = self

        def run(kind: str, payload: Any, ctx: Any = None, **kw: Any) -> Any:
            ctx = ctx or engine.Context()
            if ctx.record_outcome is not None:
                return original_run(kind, payload, ctx, **kw)
            calls: list[Any] = []
            if ctx.failure_counts is not None:
                ctx = replace(ctx, failure_counts=_recording_counts(calls, ctx.failure_counts))
            envelope = original_run(kind, payload, ctx, **kw)
            # An unpicklable payload (a test's odd object) is simply not recorded.
            with contextlib.suppress(Exception):
                recorder.save(
                    {
                        "via": "run",
                        "kind": kind,
                        "payload": payload,
                        "job_id": kw.get("job_id"),
                        "ctx": recorder._ctx_fields(ctx, calls),
                        "answer": _strip_timing(_plain(envelope)),
                    }
                )
            return envelope

        engine.run = run  # type: ignore[assignment]
        for kind, (module_name, attr) in SOLVERS.items():
            module = importlib.import_module(module_name)
            module_solve = getattr(module, attr)
            setattr(module, attr, self._wrap_solve(kind, module_solve))

    def _wrap_solve(self, kind: str, solve: Callable[..., Any]) -> Callable[..., Any]:
        recorder = self

        def wrapped(job: Any, ctx: Any) -> Any:
            calls: list[Any] = []
            if ctx.failure_counts is not None:
                ctx = replace(ctx, failure_counts=_recording_counts(calls, ctx.failure_counts))
            result = solve(job, ctx)
            with contextlib.suppress(Exception):
                recorder.save(
                    {
                        "via": "solve",
                        "kind": kind,
                        "payload": _payload(job),
                        "ctx": recorder._ctx_fields(ctx, calls),
                        "answer": _plain(result),
                    }
                )
            return result

        return wrapped


def _payload(job: Any) -> Any:
    """The job a solver was given, as JSON: a checked job (heal_org's) holds the
    validated one, which the replay checks again."""
    model = getattr(job, "job", job)
    return model.model_dump(mode="json", by_alias=False, exclude_unset=True)


def replay(record: dict[str, Any]) -> Any:
    import importlib

    from apportion import engine
    from apportion.limits import Limits

    c = record["ctx"]
    ctx = engine.Context(
        limits=Limits(**c["limits"]),
        now=c["now"],
        default_policy=c["default_policy"],
        failure_counts=_replaying_counts(c["counts"]) if c["has_counts"] else None,
    )
    if record["via"] == "run":
        envelope = engine.run(record["kind"], record["payload"], ctx, job_id=record["job_id"])
        return _strip_timing(_plain(envelope))
    module_name, attr = SOLVERS[record["kind"]]
    solve = getattr(importlib.import_module(module_name), attr)
    # What the solver reads: the validated job after its kind's checks at the edge (a
    # recording of a solver that checked the job itself replays the same answer).
    spec = kinds.get(record["kind"])
    job = spec.checked(engine.validate(record["kind"], record["payload"], ctx.limits), ctx.limits)
    return _plain(solve(job, ctx))


def first_difference(a: Any, b: Any, path: str = "$") -> str | None:
    """The JSON path of the first place ``a`` and ``b`` differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            if key not in a or key not in b:
                return f"{path}.{key}: only in {'recorded' if key in a else 'now'}"
            found = first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        if len(a) != len(b):
            return f"{path}: {len(a)} items recorded, {len(b)} now"
        return None
    if a != b or type(a) is not type(b):
        return f"{path}: recorded {json.dumps(a)[:200]}, now {json.dumps(b)[:200]}"
    return None


def check(folder: Path, kind: str | None, show: int) -> int:
    same = differ = failed = random = 0
    shown = 0
    for path in sorted(folder.glob("*.pkl")):
        record = pickle.loads(path.read_bytes())
        if kind and record["kind"] != kind:
            continue
        try:
            got = replay(record)
        except Exception as exc:
            failed += 1
            if shown < show:
                shown += 1
                print(f"--- {path.name}: replay raised {type(exc).__name__}: {exc}")
            continue
        if got == record["answer"]:
            same += 1
            continue
        # A launch_select job without a seed rolls random dice: replayed answers vary.
        if any(replay(record) != got for _ in range(3)):
            random += 1
            continue
        differ += 1
        if shown < show:
            shown += 1
            print(f"--- {path.name}: {first_difference(record['answer'], got)}")
    print(
        f"{same} same, {differ} differ, {failed} failed to replay, "
        f"{random} not deterministic (no seed)"
    )
    return 0 if differ == failed == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.golden")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="replay recorded jobs and compare their answers")
    c.add_argument("folder", type=Path)
    c.add_argument("--kind")
    c.add_argument("--show", type=int, default=5)
    args = parser.parse_args(argv)
    return check(args.folder, args.kind, args.show)


def maybe_install() -> None:
    """Called by tests/conftest.py: records when APPORTION_GOLDEN_RECORD names a folder."""
    folder = os.environ.get("APPORTION_GOLDEN_RECORD")
    if folder:
        Recorder(Path(folder)).install()


if __name__ == "__main__":
    sys.exit(main())
