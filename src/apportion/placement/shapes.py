"""The *shape* of each candidate, for all candidates at once.

The shape of an assignment (one provider per slot) is, per slot, the first slot
holding the same provider: a candidate with three unsuffixed slots on one NUMA node
and a sharing disk has the shape (0, 0, 2). Candidates of one shape are built and
priced the same way on different providers, so that work is done once per shape.
Computed here with numpy over every candidate rather than a tuple per candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import itemgetter

import numpy as np
import numpy.typing as npt

Found = Sequence[tuple[int, tuple[int, ...]]]
_SECOND = itemgetter(1)


def assignment_matrix(found: Found) -> npt.NDArray[np.intp]:
    """The providers of every candidate, one row each (``found``: (anchor, assignment))."""
    slots = len(found[0][1])
    flat = chain.from_iterable(map(_SECOND, found))
    return np.fromiter(flat, dtype=np.intp, count=len(found) * slots).reshape(len(found), slots)


def shape_codes(assigned: npt.NDArray[np.intp]) -> tuple[list[int], npt.NDArray[np.intp]]:
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
