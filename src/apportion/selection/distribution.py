"""Per-account probabilities arranged in priority groups.

The seed's two-level ranking: accounts live in priority groups (spillover order) and
inside each group carry a probability; the probabilities of a group always sum to 1.
Every policy module maps one :class:`Distribution` to the next, so the invariant is
kept in one place: :meth:`Distribution.reweighted` renormalises each group and falls
back to equal probabilities in a group whose accounts all reached 0 (saying so in a
note for the trace), and :meth:`Distribution.regrouped` splits groups.

A group is identified by a key row; groups are ordered by key, lexicographically,
smallest first (= most preferred). The first column is the tier (0 normal, 1 last
resort, see ``failure_penalty``'s ``hard_limit``) so a last-resort account stays
behind every normal group whatever strict module comes later; each strict module
appends one column (``-priority`` or cost), refining the groups it finds.

Arrays (numpy, read-only) rather than dicts: a policy over 1,000 accounts runs each
module as a handful of vector operations.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]
BoolArray = NDArray[np.bool_]

LAST_RESORT_TIER = 1.0
SHOWN = 8  # accounts a trace note names before "and N more"


def names(accounts: Iterable[str], limit: int = SHOWN, *, total: int | None = None) -> str:
    """A short, readable list of account ids for trace notes (long lists are cut).

    ``total``: how many there are when ``accounts`` holds only the first of them (a
    caller with 1,000 accounts formats the ``limit`` shown, not all).
    """
    items = list(accounts)
    count = len(items) if total is None else total
    shown = ", ".join(items[:limit])
    return shown if count <= limit else f"{shown} and {count - limit} more"


def frozen(array: NDArray[Any]) -> NDArray[Any]:
    array.setflags(write=False)
    return array


@dataclass(frozen=True, slots=True)
class Distribution:
    """Probabilities within groups, aligned with ``accounts`` (the canonical order).

    ``accounts`` is sorted by id, which makes iteration — and so the dice —
    deterministic. ``group[i]`` is account i's group, 0 = most preferred.
    """

    accounts: tuple[str, ...]
    probs: FloatArray
    keys: FloatArray  # (n, k) group key rows
    group: IntArray
    n_groups: int

    @classmethod
    def single_group(cls, accounts: Sequence[str], raw: FloatArray) -> Normalised:
        """One group holding every account, probabilities proportional to ``raw``."""
        keys = np.zeros((len(accounts), 1))
        return _normalise(tuple(accounts), raw, keys)

    def groups(self) -> list[list[str]]:
        """The groups, most preferred first, each in canonical account order."""
        out: list[list[str]] = [[] for _ in range(self.n_groups)]
        for account, g in zip(self.accounts, self.group.tolist(), strict=True):
            out[g].append(account)
        return out

    def trace_maps(self) -> tuple[dict[str, float], list[dict[str, float]]]:
        """(all probabilities group by group — the order a pie chart wants — and each
        group's ``{account: probability}``, most preferred group first), as a trace step
        shows them.

        Built with C-level ``dict(zip(...))`` over the accounts sorted stably by group
        (so canonical order within each group) rather than one Python step per
        account: a trace holds two such maps per module over every account, so this
        is the policy's own hot path at 1,000 accounts.
        """
        probs = self.probs.tolist()
        if self.n_groups == 1:
            return dict(zip(self.accounts, probs, strict=True)), [
                dict(zip(self.accounts, probs, strict=True))
            ]
        order = np.argsort(self.group, kind="stable").tolist()
        accounts = [self.accounts[i] for i in order]
        ordered = [probs[i] for i in order]
        ends = np.cumsum(np.bincount(self.group, minlength=self.n_groups)).tolist()
        groups = []
        start = 0
        for end in ends:
            groups.append(dict(zip(accounts[start:end], ordered[start:end], strict=True)))
            start = end
        return dict(zip(accounts, ordered, strict=True)), groups

    def reweighted(self, raw: FloatArray) -> Normalised:
        """Same groups, probabilities proportional to ``raw`` (≥ 0) within each group."""
        return _normalise(self.accounts, raw, self.keys, self.group, self.n_groups)

    def multiplied(self, factors: FloatArray) -> Normalised:
        """Multiply each probability by a factor ≥ 0, then renormalise within groups.

        Factors are first scaled by the largest factor of their group. That changes
        nothing after renormalisation but keeps huge factors (a weight of 1e300) from
        overflowing the group's sum to infinity.
        """
        peak = np.zeros(self.n_groups)
        np.maximum.at(peak, self.group, factors)
        top = peak[self.group]
        scale = np.divide(factors, top, out=np.zeros_like(factors), where=top > 0)
        return self.reweighted(self.probs * scale)

    def regrouped(self, component: FloatArray) -> Normalised:
        """Split every group by ``component`` (smaller first); renormalise the parts."""
        keys = np.column_stack((self.keys, component))
        return _normalise(self.accounts, self.probs, keys)

    def demoted(self, last_resort: BoolArray) -> Normalised:
        """Move ``last_resort`` accounts behind every normal group; renormalise."""
        keys = self.keys.copy()
        keys[last_resort, 0] = LAST_RESORT_TIER
        return _normalise(self.accounts, self.probs, keys)

    def rank_within_group(self, order: FloatArray) -> IntArray:
        """Dense rank of each account's ``order`` value among its group's (0 = smallest)."""
        rows = np.column_stack((self.group.astype(np.float64), order))
        _, inverse = np.unique(rows, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        first = np.full(self.n_groups, np.iinfo(np.intp).max, dtype=np.intp)
        np.minimum.at(first, self.group, inverse)
        rank: IntArray = inverse - first[self.group]
        return rank


@dataclass(frozen=True, slots=True)
class Normalised:
    """A distribution plus notes about groups that fell back to equal probabilities."""

    dist: Distribution
    notes: tuple[str, ...]


def _group_rows(keys: FloatArray) -> tuple[IntArray, int]:
    """Each row's group (0 = smallest key row, lexicographically) and the group count.

    What ``np.unique(keys, axis=0, return_inverse=True)`` answers, without sorting
    the rows as opaque records (slow at 1,000 accounts): one key column is sorted
    as floats, several with ``lexsort``. Equal
    floats (0.0 and -0.0 too) share a group either way.
    """
    if keys.shape[1] == 1:
        unique, inverse = np.unique(keys[:, 0], return_inverse=True)
        return inverse.reshape(-1).astype(np.intp), len(unique)
    order = np.lexsort(keys.T[::-1])  # the first column is the primary key
    ranked = keys[order]
    starts = np.empty(len(order), dtype=bool)
    starts[:1] = True
    starts[1:] = np.any(ranked[1:] != ranked[:-1], axis=1)
    ids = np.cumsum(starts) - 1
    group = np.empty(len(order), dtype=np.intp)
    group[order] = ids
    return group, int(ids[-1]) + 1 if len(ids) else 0


def _normalise(
    accounts: tuple[str, ...],
    raw: FloatArray,
    keys: FloatArray,
    group: IntArray | None = None,
    n_groups: int | None = None,
) -> Normalised:
    if group is None or n_groups is None:
        group, n_groups = _group_rows(keys)
    totals = np.bincount(group, weights=raw, minlength=n_groups)
    sizes = np.bincount(group, minlength=n_groups)
    total = totals[group]
    positive = total > 0
    # The seed's fine can take every account of a group to 0; the group must still be
    # usable, so it falls back to equal (and the trace says so).
    probs = np.where(positive, raw / np.where(positive, total, 1.0), 1.0 / sizes[group])
    notes: tuple[str, ...] = ()
    fallen = np.flatnonzero(totals <= 0)
    if len(fallen):
        notes = tuple(
            f"group {g} ({names(accounts[i] for i in np.flatnonzero(group == g))}): "
            "every account at 0, equal within the group"
            for g in fallen.tolist()
        )
    dist = Distribution(accounts, frozen(probs), frozen(keys), frozen(group), n_groups)
    return Normalised(dist, notes)
