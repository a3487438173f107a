"""Bareon's allocator as an oracle: its answers for partition jobs, one JSON line each.

Runs the reference implementation itself (openstack/bareon-allocator, Python 2 code of
2016) under Python 3, adapted at run time only — nothing of it is copied here:

    python bench/partition_oracle.py BAREON_ALLOCATOR_CHECKOUT < jobs.jsonl > answers.jsonl
    python bench/partition_oracle.py BAREON_ALLOCATOR_CHECKOUT --serve  # timing, see serve()

The interpreter needs scipy, numpy, yaql, six, PyYAML, termcolor and svgwrite (a venv
of its own; not the project's). The adaptations, none of which changes a decision:
``xrange``/``izip_longest``/``next`` and ``dict.keys() + …`` for Python 3; stubs for
pbr and oslo_log; one yaql engine for every expression instead of one per value (same
options); the group keys sorted with Python 2's ordering (None first, numbers before
other types, other types by name, sets by inclusion), which upstream relies on; and
the LP's values kept before upstream floors them. Each answer line holds the raw LP
values per disk, the floored ones, the fair-share groups upstream formed and the groups
that equal keys alone would form, or the error upstream raised.
"""

from __future__ import annotations

import builtins
import collections.abc  # noqa: F401  (yaql on Python 3.11 needs it imported first)
import copy
import itertools
import json
import logging
import math
import signal
import sys
import time
import types
from typing import Any

_NUMBERS = (int, float)


def _py2_lt(a: Any, b: Any) -> bool:
    """``a < b`` as Python 2 orders the values upstream sorts (its group keys)."""
    if a is None or b is None:
        return a is None and b is not None
    if isinstance(a, _NUMBERS) != isinstance(b, _NUMBERS):
        return isinstance(a, _NUMBERS)
    if isinstance(a, list) and isinstance(b, list):
        for x, y in zip(a, b, strict=False):
            if x != y:
                return _py2_lt(x, y)
        return len(a) < len(b)
    if type(a).__name__ != type(b).__name__ and not (
        isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS)
    ):
        return type(a).__name__ < type(b).__name__
    return bool(a < b)  # numbers; sets by inclusion


class _Py2Key:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Py2Key) -> bool:
        return _py2_lt(self.value, other.value)


def _stub_modules() -> None:
    builtins.xrange = range  # type: ignore[attr-defined]
    itertools.izip_longest = itertools.zip_longest  # type: ignore[attr-defined]
    pbr, version = types.ModuleType("pbr"), types.ModuleType("pbr.version")
    version.VersionInfo = lambda *_: types.SimpleNamespace(version_string=lambda: "0")  # type: ignore[attr-defined]
    pbr.version = version  # type: ignore[attr-defined]
    oslo, log = types.ModuleType("oslo_log"), types.ModuleType("oslo_log.log")
    log.getLogger = logging.getLogger  # type: ignore[attr-defined]
    oslo.log = log  # type: ignore[attr-defined]
    sys.modules.update({"pbr": pbr, "pbr.version": version, "oslo_log": oslo, "oslo_log.log": log})
    logging.Logger.warn = logging.Logger.warning  # type: ignore[attr-defined]
    logging.disable(logging.CRITICAL)


def _adapt(raw: dict[str, list[float]]) -> Any:
    """Import the allocator with its Python 2 spots adapted; returns its allocators module."""
    import yaql
    from bareon_allocator import allocators, sequences
    from bareon_allocator.parsers import expressions
    from bareon_allocator.solvers import linear_program_creator as creator
    from bareon_allocator.solvers import utils

    sequences.CrossSumInequalitySequence.__next__ = sequences.CrossSumInequalitySequence.next

    def merge(self: Any, eq1: dict[str, Any], eq2: dict[str, Any]) -> dict[str, Any]:
        keys = set(eq1) | set(eq2)
        return {
            k: (eq1.get(k) or []) + (eq2.get(k) or []) for k in keys if eq1.get(k) or eq2.get(k)
        }

    def sets_by(self: Any, criteria: list[str]) -> list[tuple[Any, list[Any]]]:
        def values(space: Any) -> list[Any]:
            return [getattr(space, c, None) for c in criteria]

        ordered = sorted(self.spaces, key=lambda s: _Py2Key(values(s)))
        return [(k, list(v)) for k, v in itertools.groupby(ordered, key=values)]

    engine = yaql.YaqlFactory().create(options=expressions.YAQLParser.engine_options)

    def parser_init(self: Any, data: Any, context: Any) -> None:
        self.parser, self.context, self.data = engine, context, data

    def keep(vector: Any) -> list[int]:
        raw["x"] = [float(v) for v in vector]
        return [math.floor(v) for v in vector]

    creator.LinearProgramCreator._merge_equations = merge
    creator.LinearProgramCreator._get_sets_by = sets_by
    expressions.YAQLParser.__init__ = parser_init
    utils.round_vector_down = keep
    return allocators, creator


def _hashable(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return ("set", frozenset(value))
    if isinstance(value, list):
        return ("list", tuple(_hashable(v) for v in value))
    return value


def _answer(allocators: Any, creator: Any, raw: dict[str, list[float]], job: Any) -> Any:
    allocator = allocators.DynamicAllocator(
        copy.deepcopy(job["hardware"]), copy.deepcopy(job["schema"])
    )
    static = allocator.generate_static()
    lp = creator.LinearProgramCreator(allocator.dynamic_schema)
    spaces = allocator.dynamic_schema.spaces
    width = len(spaces)
    buckets: dict[Any, list[str]] = {}
    for space in spaces:
        key = _hashable([getattr(space, c, None) for c in lp.weight_sets_criteria])
        buckets.setdefault(key, []).append(space.id)
    groups = lp._get_spaces_sets_by(lp.weight_sets_criteria)
    return {
        "status": "ok",
        "ids": [s.id for s in spaces],
        "floored": [[s["size"] for s in disk["spaces"]] for disk in static],
        "raw": [raw["x"][d * width : (d + 1) * width] for d in range(len(static))],
        "groups": [[s.id for s in g] for g in groups if len(g) > 1],
        "key_groups": [b for b in buckets.values() if len(b) > 1],
    }


def serve(allocators: Any, creator: Any, raw: dict[str, list[float]]) -> None:
    """Time the allocator on one job: the first stdin line is the job, answered as in
    the oracle mode (then run twice more untimed, to warm up); each later line
    ``{"calls": K}`` is answered with the wall and CPU seconds of K runs of the
    allocator on that job (the static schema and its LP, one yaql engine for all)."""
    job = json.loads(sys.stdin.readline())
    print(json.dumps(_answer(allocators, creator, raw, job)), flush=True)
    for _ in range(2):
        _answer(allocators, creator, raw, job)
    for line in sys.stdin:
        walls, cpus = [], []
        for _ in range(json.loads(line)["calls"]):
            wall, cpu = time.perf_counter(), time.process_time()
            _answer(allocators, creator, raw, job)
            cpus.append(time.process_time() - cpu)
            walls.append(time.perf_counter() - wall)
        print(json.dumps({"wall_s": walls, "cpu_s": cpus}), flush=True)


def main() -> int:
    sys.path.insert(0, sys.argv[1])
    _stub_modules()
    raw: dict[str, list[float]] = {}
    allocators, creator = _adapt(raw)
    if sys.argv[2:] == ["--serve"]:
        serve(allocators, creator, raw)
        return 0

    def too_slow(*_: Any) -> None:
        raise TimeoutError("the allocator took over 20 s")

    signal.signal(signal.SIGALRM, too_slow)
    for line in sys.stdin:
        raw.clear()
        signal.alarm(20)
        try:
            out = _answer(allocators, creator, raw, json.loads(line))
        except Exception as exc:
            out = {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:300]}
        signal.alarm(0)
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
