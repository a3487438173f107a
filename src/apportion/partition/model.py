"""The allocation problem in numbers: disks, spaces, bounds, fair-share groups, objective.

Everything here follows the seed and the Bareon allocator (the reference):

* variables ``x[d·S + s]`` (size of space ``s`` on disk ``d``), ``S`` = the lvs and
  partitions in schema order plus the artificial ``unallocated`` space last;
* objective (maximised): ``1/a(i+2)`` for variable ``i`` with
  ``a(n) = ⌊(n+1)/2⌋·⌊(n+2)/2⌋`` (1/2, 1/4, 1/6, 1/9, …), plus 2 when the space
  has ``best_with_disks`` and the disk is in it, or has none and the disk is in
  nobody's; ``unallocated`` gets exactly 1 (its index still consumes a term);
* fair shares: spaces with equal ``(min_size, max_size, best_with_disks)`` form a group
  whose totals keep the ratio of their weights; ``best_with_disks`` as declared, so
  a space whose selection found no disk stays apart from spaces that name none.

The group rules that go beyond the reference are documented in :func:`fair_share_groups`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from apportion.partition.dynamic import Space
from apportion.partition.schema import DiskSpec

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Group:
    """Spaces whose totals keep the exact ratio of ``weights`` (coprime integers)."""

    members: tuple[int, ...]  # indices of spaces, schema order
    weights: tuple[int, ...]


@dataclass(frozen=True, slots=True, eq=False)
class Problem:
    disk_ids: tuple[str, ...]
    capacity: IntArray  # (D,) whole MiB
    spaces: tuple[Space, ...]  # R lvs and partitions, schema order
    min_size: IntArray  # (R,)
    max_size: FloatArray  # (R,) whole MiB, inf when unbounded
    groups: tuple[Group, ...]
    objective: FloatArray  # (D·S,) to maximise

    @property
    def disks(self) -> int:
        return len(self.disk_ids)

    @property
    def real(self) -> int:
        """R: the number of lvs and partitions (the spaces with sizes)."""
        return len(self.spaces)

    @property
    def width(self) -> int:
        """S: spaces per disk, ``unallocated`` included."""
        return len(self.spaces) + 1

    @property
    def variables(self) -> int:
        return self.disks * self.width


def order_sequence(n: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """a(n) = ⌊(n+1)/2⌋·⌊(n+2)/2⌋ (OEIS A002620 shifted): 2, 4, 6, 9, 12, 16 … from n=2."""
    return ((n + 1) // 2) * ((n + 2) // 2)


def fair_share_groups(spaces: Sequence[Space]) -> tuple[Group, ...]:
    """Group spaces by equal (min_size, max_size, best_with_disks), as the reference does.

    The key holds best_with_disks as declared (:attr:`Space.best_with_disks`): a space
    that asked for, say, the SSDs of a node that has none differs in what it asked
    from one that asked nothing, so the two keep no ratio (one 100 MiB hdd, ``a``
    without keys then ``b`` preferring the absent SSDs: a = 100, b = 0, not 50/50).
    For the objective both mean "no preference".

    Beyond the reference:

    * A space with a fixed size (``size: N``, or min = max) joins no group: its size is
      already decided, and upstream's equality would make two fixed spaces with
      different weights infeasible for no reason.
    * A space with weight 0 joins no group (upstream skips it as a member, and a
      weight-0 first member would divide by zero).
    * Spaces with equal keys always form one group. Upstream groups by sorting the
      keys with Python 2's ordering, where disk sets compare by inclusion, so a set
      that is neither a subset nor a superset can sort between two equal keys and
      split their group; that accident is not copied.

    Weights become coprime integers (exact fractions scaled by the lcm of their
    denominators), so "a : b = 2 : 1" is an integer equation ``1·a − 2·b = 0`` that
    whole MiB can satisfy exactly.
    """
    buckets: dict[tuple[int, float, frozenset[str] | None], list[int]] = {}
    for s, space in enumerate(spaces):
        maximum = space.max_size
        if maximum == space.min_size or space.weight == 0:  # fixed: an int max equal to min
            continue
        high = math.inf if maximum is None else float(maximum)
        buckets.setdefault((space.min_size, high, space.best_with_disks), []).append(s)
    groups = []
    for members in buckets.values():
        if len(members) < 2:
            continue
        weights = [spaces[s].weight for s in members]
        groups.append(Group(tuple(members), _coprime_integers(weights)))
    groups.sort(key=lambda g: g.members[0])
    return tuple(groups)


def _coprime_integers(weights: Sequence[Fraction]) -> tuple[int, ...]:
    scale = math.lcm(*(w.denominator for w in weights))
    ints = [int(w * scale) for w in weights]
    divisor = math.gcd(*ints)
    return tuple(i // divisor for i in ints)


def objective(disk_ids: Sequence[str], spaces: Sequence[Space]) -> FloatArray:
    """The reference's objective vector, built without loops over cells."""
    if not any(space.best_with_disks for space in spaces):  # no best_with for any space
        return _objective_without_preferences(len(disk_ids), len(spaces))
    return _objective(len(disk_ids), len(spaces), _preferred(disk_ids, spaces))


# Without best_with_disks the objective depends on the shape alone, and a worker sees
# few shapes: made once per shape (read-only, since every problem of it shares it).
@functools.lru_cache(maxsize=64)
def _objective_without_preferences(disks: int, real: int) -> FloatArray:
    coefficient = _objective(disks, real, None)
    coefficient.flags.writeable = False
    return coefficient


def _objective(disks: int, real: int, preferred: npt.NDArray[np.bool_] | None) -> FloatArray:
    """Order terms plus the bonus of 2 where ``preferred`` (R, D) holds (everywhere if None)."""
    width = real + 1
    coefficient = (
        1.0 / order_sequence(np.arange(2, disks * width + 2, dtype=np.int64)).astype(np.float64)
    ).reshape(disks, width)
    if preferred is not None:
        coefficient[:, :real] += 2.0 * preferred.T
    else:  # nobody prefers a disk, so every disk is preferred by every space
        coefficient[:, :real] += 2.0
    coefficient[:, real] = 1.0  # unallocated: exactly 1, no order term
    return coefficient.ravel()


def _preferred(disk_ids: Sequence[str], spaces: Sequence[Space]) -> npt.NDArray[np.bool_]:
    """(R, D): True where space s gets the bonus on disk d.

    That is where its best_with_disks set holds d, or, for a space without a set,
    where nobody's set holds d.
    """
    position = {d: j for j, d in enumerate(disk_ids)}
    # member[s, d]: disk d is in space s's best_with_disks set.
    member = np.zeros((len(spaces), len(disk_ids)), dtype=bool)
    has_set = np.zeros(len(spaces), dtype=bool)
    for s, space in enumerate(spaces):
        if space.best_with is not None:
            has_set[s] = True
            member[s, [position[d] for d in space.best_with]] = True
    claimed: npt.NDArray[np.bool_] = np.any(member, axis=0)  # disks somebody prefers
    preferred: npt.NDArray[np.bool_] = np.where(has_set[:, None], member, ~claimed[None, :])
    return preferred


def build(disks: Sequence[DiskSpec], spaces: Sequence[Space]) -> Problem:
    disk_ids = tuple([d.id for d in disks])
    return Problem(
        disk_ids=disk_ids,
        capacity=np.array([d.capacity for d in disks], dtype=np.int64),
        spaces=tuple(spaces),
        min_size=np.array([s.min_size for s in spaces], dtype=np.int64),
        max_size=np.array(
            [math.inf if s.max_size is None else s.max_size for s in spaces], dtype=np.float64
        ),
        groups=fair_share_groups(spaces),
        objective=objective(disk_ids, spaces),
    )
