"""The candidates as arrays, and the *shape* of each candidate, for all at once.

:class:`Found` holds the candidates of one answer compactly: each one's anchoring
root and its providers (one per slot), as two numpy arrays. Reading it as
``(anchor, assignment)`` pairs still works, for the rare callers that want tuples.

The shape of an assignment (one provider per slot) is, per slot, the first slot
holding the same provider: a candidate with three unsuffixed slots on one NUMA node
and a sharing disk has the shape (0, 0, 2). Candidates of one shape are built and
priced the same way on different providers, so that work is done once per shape.
Computed here with numpy over every candidate rather than a tuple per candidate.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import overload

import numpy as np
import numpy.typing as npt

Assignment = tuple[int, ...]
IndexArray = npt.NDArray[np.intp]
_SECOND = itemgetter(1)


@dataclass(frozen=True, slots=True)
class Found(Sequence[tuple[int, Assignment]]):
    """Candidates in answer order: ``anchors[i]`` and the providers ``assigned[i]``."""

    anchors: IndexArray  # shape (n,)
    assigned: IndexArray  # shape (n, slots)

    @classmethod
    def of(cls, pairs: Sequence[tuple[int, Assignment]], slots: int) -> Found:
        """From (anchor, assignment) pairs, each assignment ``slots`` long."""
        anchors = np.fromiter(map(itemgetter(0), pairs), dtype=np.intp, count=len(pairs))
        flat = chain.from_iterable(map(_SECOND, pairs))
        assigned = np.fromiter(flat, dtype=np.intp, count=len(pairs) * slots)
        return cls(anchors, assigned.reshape(len(pairs), slots))

    def __len__(self) -> int:
        return len(self.anchors)

    @overload
    def __getitem__(self, i: int) -> tuple[int, Assignment]: ...
    @overload
    def __getitem__(self, i: slice) -> Found: ...
    def __getitem__(self, i: int | slice) -> tuple[int, Assignment] | Found:
        if isinstance(i, slice):
            return Found(self.anchors[i], self.assigned[i])
        return int(self.anchors[i]), tuple(self.assigned[i].tolist())

    def __iter__(self) -> Iterator[tuple[int, Assignment]]:
        return zip(self.anchors.tolist(), map(tuple, self.assigned.tolist()), strict=True)

    def take(self, rows: Iterable[int]) -> Found:
        """The candidates at ``rows``, in that order."""
        at = np.fromiter(rows, dtype=np.intp)
        return Found(self.anchors[at], self.assigned[at])

    def providers(self) -> IndexArray:
        """Every provider some candidate uses, ascending, once each."""
        # Marked in a mask over the provider indices: linear, where np.unique sorts.
        if not self.assigned.size:
            return np.empty(0, dtype=np.intp)
        used = np.zeros(int(self.assigned.max()) + 1, dtype=np.bool_)
        used[self.assigned.reshape(-1)] = True
        return np.flatnonzero(used)


def shape_codes(assigned: IndexArray) -> tuple[list[int], IndexArray]:
    """(the first row of each distinct shape, each row's shape number)."""
    rows, slots = assigned.shape
    if slots == 1:  # one shape: (0,)
        return [0], np.zeros(rows, dtype=np.intp)
    first = np.empty_like(assigned)
    for j in range(slots):
        first[:, j] = j
        for i in range(j - 1, -1, -1):  # ends at the smallest such slot
            first[assigned[:, i] == assigned[:, j], j] = i
    if slots**slots < 2**62:  # the shape as one number in base ``slots``: a fast unique
        code = np.zeros(rows, dtype=np.int64)
        for j in range(slots):
            code = code * slots + first[:, j]
        _, at, shape_of = np.unique(code, return_index=True, return_inverse=True)
    else:  # 16 slots or more: rows compared whole (slower, exact)
        _, at, shape_of = np.unique(first, axis=0, return_index=True, return_inverse=True)
    return at.tolist(), shape_of.reshape(-1)


def rows_of_shapes(shape_of: IndexArray, shapes: int) -> list[IndexArray]:
    """The rows of each shape, ascending (one argsort rather than a scan per shape)."""
    if shapes == 1:
        return [np.arange(len(shape_of))]
    order = np.argsort(shape_of, kind="stable")
    ends = np.cumsum(np.bincount(shape_of, minlength=shapes))
    return np.split(order, ends[:-1])
