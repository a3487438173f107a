"""Why a schema has no allocation, in words a user can act on.

The LP's constraints never mention ``best_with_disks`` (that only steers the
objective) and any space may use any disk, so the LP is infeasible exactly when

* a fair-share group cannot meet its own bounds: its members' totals keep the ratio
  of their weights (``x_s = W_s·t``), so every member reaching the common min_size
  needs ``t ≥ min/min(W)`` while none passing the common max_size needs
  ``t ≤ max/max(W)``; or
* the spaces' minimum needs together exceed the disks' capacity, a group needing
  ``ΣW · min/min(W)`` MiB.

:func:`diagnose` checks both in exact fractions before the LP runs, so an infeasible
job costs no solver call and its message names the spaces and sizes involved.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from apportion.errors import Infeasible, Problem
from apportion.partition.model import Problem as Model

_LISTED = 8  # spaces named in one message before "and N more"


def _names(items: Sequence[str]) -> str:
    if len(items) > _LISTED:
        items = [*items[:_LISTED], f"{len(items) - _LISTED} more"]
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


def _mib(value: Fraction) -> str:
    return f"{value.numerator}" if value.denominator == 1 else f"{float(value):.2f}"


def diagnose(model: Model) -> Infeasible | None:
    """An :class:`Infeasible` describing why no allocation exists, or None if one does."""
    if not model.groups and sum(model.min_size.tolist()) <= sum(model.capacity.tolist()):
        # Without fair-share groups each space needs exactly its min_size: a whole-MiB
        # sum settles it, no fractions needed (the common case on the worker's hot path).
        return None
    found = _needs(model)
    if isinstance(found, Infeasible):
        return found
    need, weighted = found
    required = sum(need.values(), Fraction(0))
    capacity = int(model.capacity.sum())
    if required <= capacity:
        return None
    return _too_little_room(model, need, weighted, required, capacity)


def _needs(model: Model) -> tuple[dict[int, Fraction], set[int]] | Infeasible:
    """What each space needs at least (a fair share's need follows its group's smallest
    min_size), and the spaces whose need is a weighted share; or why a group cannot fit."""
    spaces = model.spaces
    need: dict[int, Fraction] = {s: Fraction(int(model.min_size[s])) for s in range(model.real)}
    weighted: set[int] = set()
    for group in model.groups:
        w_min, w_max = min(group.weights), max(group.weights)
        low = Fraction(int(model.min_size[group.members[0]]), w_min)
        high_bound = model.max_size[group.members[0]]
        ids = [spaces[s].id for s in group.members]
        ratio = ":".join(str(w) for w in group.weights)
        if high_bound != float("inf") and low > Fraction(int(high_bound), w_max):
            message = (
                f"spaces {_names(ids)} share fairly in the ratio {ratio} with the same "
                f"min_size {model.min_size[group.members[0]]} and max_size {int(high_bound)}: "
                "the largest share would pass max_size before the smallest reaches min_size; "
                "give them equal weights or different sizes"
            )
            path = f"schema[{spaces[group.members[0]].position}].weight"
            return Infeasible(message, [Problem(path, message)])
        for s, w in zip(group.members, group.weights, strict=True):
            need[s] = low * w
            if w != w_min:
                weighted.add(s)
    return need, weighted


def _too_little_room(
    model: Model,
    need: dict[int, Fraction],
    weighted: set[int],
    required: Fraction,
    capacity: int,
) -> Infeasible:
    """The spaces that need room, named with what each needs, against the disks' room."""
    spaces = model.spaces
    needy = [s for s in range(model.real) if need[s] > 0]
    described = []
    for s in needy:
        space = spaces[s]
        detail = f"min {space.min_size}" if not space.fixed else f"size {space.min_size}"
        if s in weighted:
            detail += f", {_mib(need[s])} as its weighted fair share"
        described.append(f"{space.id} ({detail})")
    subject = "space" if len(needy) == 1 else "spaces"
    verb = "needs" if len(needy) == 1 else "need"
    disks = "the disk holds" if model.disks == 1 else "the disks hold"
    message = (
        f"{subject} {_names(described)} {verb} {_mib(required)} MiB but {disks} "
        f"{capacity} MiB; lower a min_size/size or add disk space"
    )
    problems = [
        Problem(
            f"schema[{spaces[s].position}].{'size' if spaces[s].fixed else 'min_size'}",
            f"needs {_mib(need[s])} MiB of the {capacity} MiB the disks hold",
        )
        for s in needy
    ]
    return Infeasible(message, problems)
