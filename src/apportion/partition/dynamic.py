"""Dynamic values: evaluate every ``yaql=EXPR`` and turn the schema into typed spaces.

Any top-level string value of a space (``size``, ``min_size``, ``max_size``,
``weight``, ``best_with_disks``, ``mount``, ``fs_type`` or any extra key) that starts
with ``yaql=`` is evaluated with ``$`` bound to the whole hardware document, as the
seed describes. All of a job's expressions go to :func:`apportion.yaql_eval.evaluate_batch`
in one batch (one forked child, bounded in length, iterations, memory and time); a
failing expression is ``rejected`` with its path, e.g. ``schema[3].size``. Values
nested inside lists or dicts are data and are not evaluated.

Decisions where the seed and the reference are silent (all in whole MiB):

* ``size: N`` means exactly N MiB (min = max = N), **including** ``size: 0``: the
  space is kept and gets nothing. Upstream skips ``size: 0`` only because it tests
  the value for truth; a yaql size that computes 0 (no swap on a big-RAM node) is a
  real request for nothing. ``null`` means "not given".
* Sizes are whole MiB: ``min_size`` rounds up, ``max_size`` rounds down, ``size``
  rounds to the nearest MiB (half up); values within 1e-6 of a whole MiB snap to it,
  so float noise (24.9999999) never loses a MiB.
* ``size`` together with ``min_size``/``max_size`` is accepted when consistent
  (min ≤ size ≤ max) and rejected otherwise; ``min_size`` > ``max_size`` is rejected.
* ``weight`` is a number in [0, 10⁶], read as an exact fraction (floats by their
  shortest decimal form, to a denominator of at most 10⁶, so 0.1 is 1/10).
* ``best_with_disks`` is a list of disks (dicts with an ``id``, as yaql's
  ``$.disks.where(…)`` yields) or of disk ids. An empty list (a selection that finds
  no disk) means no preference for the objective, yet the space still *declared* a
  preference: it shares fair shares only with spaces that declared the same set, as
  in the reference, never with spaces that name none. ``null`` names none, as null
  means "not given" for every key here (the reference would keep it apart as a key of
  its own, as it does a null min_size).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, NamedTuple

from apportion.errors import Problem, Rejected
from apportion.limits import Limits, env_name, over_limit
from apportion.partition.schema import SNAP, ParsedSchema, RawSpace, whole_ceil, whole_floor
from apportion.yaql_eval import evaluate_batch

PREFIX = "yaql="
MAX_WEIGHT = 10**6
WEIGHT_DENOMINATOR = 10**6
# The default weight, made once: Fraction's constructor is Python code, and fractions
# are immutable, so every space may share it.
_ONE = Fraction(1)

# Keys with a meaning to the solver; every other key is passed through as an attribute.
KNOWN_KEYS = frozenset(
    {"size", "min_size", "max_size", "weight", "best_with_disks", "mount", "fs_type"}
)


class Space(NamedTuple):
    """An lv or partition with every value evaluated and checked, sizes in whole MiB.

    Immutable; a NamedTuple rather than a frozen dataclass for the reason the records
    of :mod:`.schema` are (a job builds one per space, and cheaply).
    """

    position: int  # in the job's schema (JSON paths)
    id: str
    type: str  # "lv" | "partition"
    min_size: int
    max_size: int | None  # None: no upper bound
    weight: Fraction
    # Disk ids as declared: None when the space names none, empty when its list (or
    # its expression's selection) holds no disk. Fair-share groups key on this.
    best_with_disks: frozenset[str] | None
    mount: str | None
    fs_type: str | None
    attributes: Mapping[str, Any]

    @property
    def fixed(self) -> bool:
        return self.max_size is not None and self.min_size == self.max_size

    @property
    def best_with(self) -> frozenset[str] | None:
        """The disks the objective favours for this space; None: no preference."""
        return self.best_with_disks or None


class Resolved(NamedTuple):
    spaces: tuple[Space, ...]  # lvs and partitions, schema order
    vg_attributes: Mapping[str, Mapping[str, Any]]  # vg id -> its evaluated extra keys


def is_expression(value: Any) -> bool:
    return isinstance(value, str) and value.lstrip().startswith(PREFIX)


def _expression(value: str) -> str:
    return value.lstrip()[len(PREFIX) :]


def evaluate(parsed: ParsedSchema, limits: Limits) -> dict[int, Mapping[str, Any]]:
    """Every space's fields with yaql values replaced by their results (index -> fields)."""
    # is_expression inlined: this runs over every value of every job
    expressions = {
        f"{space.path}.{key}": _expression(value)
        for space in parsed.spaces
        for key, value in space.fields.items()
        if isinstance(value, str) and value.lstrip().startswith(PREFIX)
    }
    if not expressions:  # most schemas: nothing to evaluate, the fields are the values
        return {space.position: space.fields for space in parsed.spaces}  # read, never written
    batch = evaluate_batch(expressions, parsed.hardware, limits)
    batch.raise_if_failed()
    results: Mapping[str, Any] = batch.values
    return {
        space.position: {
            key: results[f"{space.path}.{key}"] if is_expression(value) else value
            for key, value in space.fields.items()
        }
        for space in parsed.spaces
    }


def _huge(value: float) -> str | None:
    """How to name an int that yaql made too large for ``:g`` (and, past 4,300 digits,
    for ``repr``); None for any other number."""
    if isinstance(value, int) and value.bit_length() > 1023:  # beyond float range
        return f"a number of about {int(value.bit_length() * 0.30103) + 1} digits"
    return None


def _magnitude(value: float) -> str:
    huge = _huge(value)
    return f"{huge} in" if huge else f"{value:g}"


def _shown(value: float) -> str:
    return _huge(value) or repr(value)


class _Checker:
    """Collects every problem of one job so the user sees them all at once.

    A value's JSON path is passed as the space's path and the key, and joined only
    when the value fails: every space has seven keys to check, and nearly all pass.
    """

    def __init__(self, limits: Limits, disk_ids: frozenset[str]) -> None:
        self.limits = limits
        self.disk_ids = disk_ids
        self.problems: list[Problem] = []
        self.oversized = 0  # problems that are sizes over partition_max_size_mib

    def fail(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def size(self, space: str, key: str, value: Any) -> float | None:
        if value is None:
            return None
        path = f"{space}.{key}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            what = "a string" if isinstance(value, str) else type(value).__name__
            self.fail(path, f'must be a number of MiB or a "yaql=…" expression, got {what}')
            return None
        if (isinstance(value, float) and not math.isfinite(value)) or value < 0:
            self.fail(path, f"must be a finite, non-negative number of MiB, got {_shown(value)}")
            return None
        if value > self.limits.partition_max_size_mib:  # ints of any size compare exactly
            self.oversized += 1
            self.fail(
                path,
                f"{_magnitude(value)} MiB exceeds the largest supported size of "
                f"{self.limits.partition_max_size_mib} MiB "
                f"(raise {env_name('partition_max_size_mib')})",
            )
            return None
        return float(value) if isinstance(value, float) else value

    def weight(self, space: str, value: Any) -> Fraction:
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(
                f"{space}.weight", f'must be a number or a "yaql=…" expression, got {value!r:.60}'
            )
            return _ONE
        if (isinstance(value, float) and not math.isfinite(value)) or not 0 <= value <= MAX_WEIGHT:
            self.fail(
                f"{space}.weight", f"must be a number from 0 to {MAX_WEIGHT}, got {_shown(value)}"
            )
            return _ONE
        if isinstance(value, int):  # already exact; limit_denominator would return it
            return _ONE if value == 1 else Fraction(value)
        exact = Fraction(repr(value))
        weight = exact.limit_denominator(WEIGHT_DENOMINATOR)
        if value > 0 and weight == 0:
            self.fail(f"{space}.weight", f"a positive weight must be at least 1e-6, got {value!r}")
            return _ONE
        return weight

    def best_with(self, space: str, value: Any) -> frozenset[str] | None:
        if value is None:
            return None
        path = f"{space}.best_with_disks"
        if not isinstance(value, list):
            self.fail(
                path,
                'must be a list of disks or disk ids, or a "yaql=…" expression '
                f"giving one, got {type(value).__name__}",
            )
            return None
        ids = set()
        for j, item in enumerate(value):
            disk_id = item.get("id") if isinstance(item, dict) else item
            if not isinstance(disk_id, str):
                self.fail(
                    f"{path}[{j}]", f"must be a disk (with an `id`) or a disk id, got {item!r:.60}"
                )
            elif disk_id not in self.disk_ids:
                self.fail(f"{path}[{j}]", f"unknown disk {disk_id!r}")
            else:
                ids.add(disk_id)
        return frozenset(ids)

    def text(self, space: str, key: str, value: Any) -> str | None:
        if value is None or isinstance(value, str):
            return value
        self.fail(f"{space}.{key}", f"must be a string, got {type(value).__name__}")
        return None


def _bounds(check: _Checker, path: str, fields: Mapping[str, Any]) -> tuple[int, int | None]:
    # A key most spaces leave out costs no call (here and in _space).
    size = fields.get("size")
    low = fields.get("min_size")
    high = fields.get("max_size")
    size = None if size is None else check.size(path, "size", size)
    low = None if low is None else check.size(path, "min_size", low)
    high = None if high is None else check.size(path, "max_size", high)
    if size is not None:
        exact = math.floor(size + 0.5) if abs(size - round(size)) > SNAP else round(size)
        if low is not None and whole_ceil(low) > exact:
            check.fail(f"{path}.size", f"size {size:g} is less than min_size {low:g}")
        if high is not None and whole_floor(high) < exact:
            check.fail(f"{path}.size", f"size {size:g} is more than max_size {high:g}")
        return int(exact), int(exact)
    minimum = whole_ceil(low) if low is not None else 0
    maximum = whole_floor(high) if high is not None else None
    # minimum > maximum ≥ 0 needs a positive min_size, so both bounds were given
    if maximum is not None and minimum > maximum and low is not None and high is not None:
        reason = "is greater than" if low > high else "and max_size leave no whole MiB between"
        check.fail(f"{path}.min_size", f"min_size {low:g} {reason} max_size {high:g}")
    return minimum, maximum


def _space(check: _Checker, raw: RawSpace, fields: Mapping[str, Any]) -> Space:
    path = raw.path
    minimum, maximum = _bounds(check, path, fields)
    get = fields.get
    # Checked in this order (weight, best_with_disks, mount, fs_type): problems are
    # reported in the order they are found.
    weight = get("weight", 1)
    weight = _ONE if type(weight) is int and weight == 1 else check.weight(path, weight)
    best_with = get("best_with_disks")
    if best_with is not None:
        best_with = check.best_with(path, best_with)
    mount = get("mount")
    if not (mount is None or type(mount) is str):
        mount = check.text(path, "mount", mount)
    fs_type = get("fs_type")
    if not (fs_type is None or type(fs_type) is str):
        fs_type = check.text(path, "fs_type", fs_type)
    return Space(
        raw.position,
        raw.id,
        raw.type,
        minimum,
        maximum,
        weight,
        best_with,
        mount,
        fs_type,
        {k: v for k, v in fields.items() if k not in KNOWN_KEYS},
    )


def resolve(parsed: ParsedSchema, limits: Limits) -> Resolved:
    """Evaluate yaql and check every value; raise :class:`Rejected` listing every problem."""
    evaluated = evaluate(parsed, limits)
    check = _Checker(limits, frozenset([d.id for d in parsed.disks]))
    spaces = tuple(
        [_space(check, raw, evaluated[raw.position]) for raw in parsed.spaces if raw.type != "vg"]
    )
    vg_attributes = {
        vg.space.id: {k: v for k, v in evaluated[vg.space.position].items() if k not in KNOWN_KEYS}
        for vg in parsed.volume_groups
    }
    if check.problems and check.oversized == len(check.problems):
        raise over_limit("partition_max_size_mib", check.problems)
    if check.problems:  # a job invalid besides its sizes is invalid first
        raise Rejected.of(check.problems)
    return Resolved(spaces, vg_attributes)
