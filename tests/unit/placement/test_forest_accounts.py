"""Every provider's account, over random forests: its own, else its root's, else the
root's uuid."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from apportion.contracts.launch import PROVIDER
from apportion.limits import DEFAULT_LIMITS
from apportion.placement.model import build_forest

ACCOUNT = st.one_of(st.none(), st.sampled_from(["", "acme", "x", "p1"]))


@st.composite
def forests(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Providers p0..pn, each parented by an earlier one or a root; parents may come
    later in the list (the list is shuffled)."""
    n = draw(st.integers(min_value=1, max_value=12))
    parents = [None] + [
        draw(st.one_of(st.none(), st.integers(min_value=0, max_value=i - 1))) for i in range(1, n)
    ]
    providers = [
        PROVIDER.validate_python(
            {
                "uuid": f"p{i}",
                "parent_provider_uuid": None if parent is None else f"p{parent}",
                "account": draw(ACCOUNT),
            }
        )
        for i, parent in enumerate(parents)
    ]
    return draw(st.permutations(providers))


@given(forests())
def test_a_providers_account_is_its_own_else_its_roots_else_the_roots_uuid(
    providers: list[dict[str, Any]],
) -> None:
    by_uuid = {p["uuid"]: p for p in providers}

    def root(p: dict[str, Any]) -> dict[str, Any]:
        while p["parent_provider_uuid"] is not None:
            p = by_uuid[p["parent_provider_uuid"]]
        return p

    expected = []
    for p in providers:
        top = root(p)
        fallback = top["uuid"] if top["account"] is None else top["account"]
        expected.append(fallback if p["account"] is None else p["account"])

    assert list(build_forest(providers, DEFAULT_LIMITS).accounts) == expected
