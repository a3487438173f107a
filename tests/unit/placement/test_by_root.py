"""Providers grouped by root as arrays read exactly as the plain dict of tuples."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from apportion.placement.product import _joined
from apportion.placement.slots import ByRoot

ROOT = st.integers(min_value=0, max_value=8)
PAIRS = st.lists(st.tuples(ROOT, st.integers(min_value=0, max_value=50)), max_size=30)


def grouped(pairs: list[tuple[int, int]]) -> ByRoot:
    roots = np.array([r for r, _ in pairs], dtype=np.int64)
    providers = np.array([p for _, p in pairs], dtype=np.int64)
    return ByRoot(roots, providers)


def plain(pairs: list[tuple[int, int]]) -> dict[int, tuple[int, ...]]:
    out: dict[int, list[int]] = {}
    for root, provider in pairs:
        out.setdefault(root, []).append(provider)
    return {r: tuple(ps) for r, ps in out.items()}


@given(PAIRS, ROOT)
def test_grouped_providers_read_as_the_plain_grouping_in_the_order_given(
    pairs: list[tuple[int, int]], probe: int
) -> None:
    by_root, expected = grouped(pairs), plain(pairs)

    assert dict(by_root) == expected
    assert list(by_root) == sorted(expected)  # anchors are visited in root order
    assert by_root.keys_set() == set(expected)
    assert bool(by_root) is bool(expected)
    assert len(by_root) == len(expected)
    assert by_root.get(probe, ()) == expected.get(probe, ())
    assert by_root.get(probe) == expected.get(probe, ())  # a miss reads as no providers


@given(PAIRS, PAIRS, st.lists(ROOT, unique=True).map(sorted))
def test_every_anchors_members_then_sharing_providers_one_anchor_after_another(
    members: list[tuple[int, int]], shared: list[tuple[int, int]], anchors: list[int]
) -> None:
    m, s = plain(members), plain(shared)
    chosen = [m.get(a, ()) + s.get(a, ()) for a in anchors]

    flat, count = _joined(np.array(anchors, dtype=np.int64), grouped(members), grouped(shared))

    assert flat.tolist() == [p for c in chosen for p in c]
    assert count.tolist() == [len(c) for c in chosen]
