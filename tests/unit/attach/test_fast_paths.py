"""The engine's fast paths give what their plain formulations give (hypothesis).

Each fast path reads a pool once with the run's values bound, or remembers an answer
per distinct value; the plain formulation reads every pool on its own.
"""

from __future__ import annotations

import math
from datetime import datetime
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from apportion.attach.autoattach import _attached, _members, _needs
from apportion.attach.compliance import (
    CoverageContext,
    Tally,
    attached_entitlements,
    read_compliance,
)
from apportion.attach.facts import consumer_profile
from apportion.attach.groups import build_groups
from apportion.attach.inputs import AttachInput
from apportion.attach.offers import read_offers
from apportion.attach.pools import (
    PoolFilters,
    PoolView,
    currently_available,
    drop_reason,
    view_pool,
)
from apportion.attach.priority import PROFILES, Scorer
from apportion.contracts.attach import AutoAttachJob, Pool
from apportion.contracts.attach_checks import ProblemLog, check_pool, check_pools
from tests.unit.attach.support import NOW, checked
from tests.unit.attach.test_invariants import jobs

SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
_RARE_VALUES = {
    "requires_consumer_type": ["system", "person", "hypervisor"],
    "requires_consumer": ["c", "other"],
    "physical_only": ["true", "false"],
    "unmapped_guests_only": ["true"],
    "roles": ["Server", "0", "other"],
    "addons": ["EUS", "0"],
}
# Readings the model fast path must treat as the view does: "0" or null unset.
_UNSET_VALUES = {
    "sockets": ["0", None],
    "ram": ["0"],
    "arch": ["0", "ppc64le", None],
    "instance_multiplier": ["0", "2"],
    "multi-entitlement": ["0", "no", "YES"],
    "stacking_id": [None],
}


@st.composite
def unset_jobs(draw: st.DrawFn) -> dict[str, Any]:
    """tests.unit.attach.test_invariants.jobs with product attributes that read as unset
    ("0" or null) or that the filters read differently, and dates without a zone."""
    payload = draw(jobs())
    for pool in payload["pools"]:
        for name, values in _UNSET_VALUES.items():
            if draw(st.integers(0, 5)) == 0:
                pool["product_attributes"][name] = draw(st.sampled_from(values))
        if pool["start_date"] is not None and draw(st.integers(0, 5)) == 0:
            pool["start_date"] = pool["start_date"].rstrip("Z")  # no zone: read as UTC
    return payload


@st.composite
def varied_jobs(draw: st.DrawFn) -> dict[str, Any]:
    """unset_jobs with what tests.unit.attach.test_invariants.jobs leaves out: consumer
    types, the rarely set attributes, syspurpose on the pool's own attributes or "0",
    derived products."""
    payload = draw(unset_jobs())
    payload["consumer"]["type"] = draw(st.sampled_from(["system", "person", "hypervisor"]))
    for pool in payload["pools"]:
        for name, values in _RARE_VALUES.items():
            for target in ("attributes", "product_attributes"):
                if draw(st.integers(0, 3)) == 0:
                    pool[target][name] = draw(st.sampled_from(values))
        if draw(st.integers(0, 4)) == 0:
            pool["derived_product_id"] = draw(st.sampled_from(["p0", "p3", "sku-d"]))
            pool["derived_provided_products"] = draw(
                st.lists(st.sampled_from(["p1", "p2", "p4"]), max_size=2, unique=True)
            )
    return payload


def _attach_input(payload: dict[str, Any]) -> AttachInput:
    job: AutoAttachJob = checked("auto_attach", payload)
    consumer = consumer_profile(job.consumer)
    entitlements = attached_entitlements(job.entitlements)
    compliance = read_compliance(job.compliance, consumer, entitlements, NOW)
    return AttachInput(
        consumer=consumer,
        pools=job.pools,
        products=job.products,
        compliance=compliance,
        entitlements=entitlements,
        at=NOW,
        profile=PROFILES[job.rules],
        host_uuid=job.host_uuid,
    )


@SETTINGS
@given(
    st.one_of(varied_jobs(), unset_jobs()),
    st.sampled_from([NOW, datetime.fromisoformat("2026-06-15T00:00:00+00:00")]),
    st.booleans(),
    st.data(),
)
def test_the_pool_filters_from_the_view_or_the_model_give_what_the_plain_functions_give(
    payload: dict[str, Any], at: datetime, below_multiplier: bool, data: st.DataObject
) -> None:
    inp = _attach_input(payload)
    views = [view_pool(pool, i) for i, pool in enumerate(inp.pools)]
    attached = frozenset(data.draw(st.lists(st.sampled_from([v.id for v in views]))))
    check = PoolFilters(
        inp.consumer,
        at=at,
        host_uuid=inp.host_uuid,
        attached_pool_ids=attached,
        below_multiplier=below_multiplier,
    )
    for view in views:
        available = currently_available(view, inp.consumer)
        plain = drop_reason(
            view,
            inp.consumer,
            at=at,
            host_uuid=inp.host_uuid,
            attached_pool_ids=attached,
            available=available,
            below_multiplier=below_multiplier,
        )
        assert check.check(view) == (available, plain)
        from_model = check.check_model(view.model)
        assert from_model is None or from_model == (available, plain)


# The product's role "0" (unset): the pool's own role is read, in both paths.
_ZERO_ROLE = {
    "consumer": {"uuid": "c", "installed_products": ["p0"], "role": "Server"},
    "pools": [
        {
            "id": "a",
            "product_id": "sku-a",
            "quantity": 5,
            "attributes": {"roles": "Server"},
            "product_attributes": {"roles": "0"},
            "provided_products": ["p1"],
        }
    ],
    "rules": "candlepin-5.42",
}


@SETTINGS
@given(varied_jobs(), st.booleans())
@example(_ZERO_ROLE, False)
def test_offers_read_from_the_pools_equal_offers_read_from_their_views(
    payload: dict[str, Any], consider_derived: bool
) -> None:
    inp = _attach_input(payload)
    needs = _needs(inp)
    partial = inp.compliance.partial_stacks
    server = inp.profile.reads_like_the_server
    views = [view_pool(pool, i) for i, pool in enumerate(inp.pools)]
    from_pools = read_offers(inp.pools, needs, partial, consider_derived, server)
    from_views = read_offers(views, needs, partial, consider_derived, server)
    assert from_pools == from_views


@SETTINGS
@given(varied_jobs(), st.randoms(use_true_random=False))
def test_a_pool_scores_the_same_whatever_the_pools_scored_before_it(
    payload: dict[str, Any], rng: Any
) -> None:
    inp = _attach_input(payload)
    wants = _needs(inp).wants
    views = [view_pool(pool, i) for i, pool in enumerate(inp.pools)]
    alone = [Scorer(inp.consumer, wants, inp.profile).score(v) for v in views]
    shared = Scorer(inp.consumer, wants, inp.profile)
    order = list(range(len(views)))
    rng.shuffle(order)
    together = dict.fromkeys(order, 0)
    for i in order:
        together[i] = shared.score(views[i])
    assert [together[i] for i in range(len(views))] == alone


def _sizing_points_by_plan(scorer: Scorer, view: PoolView) -> int:
    """The sizing part of a pool's score as the reference reads it: each attribute of the
    plan in turn, 20 points when either side does not set it."""
    sizes = view.sizes_for(scorer.consumer.is_guest)
    total = 0
    for attribute in scorer.profile.sizing_attributes(scorer.consumer):
        need = Fraction(scorer.consumer.fact(attribute))
        size = sizes.get(attribute)
        if need <= 0 or size is None or size <= 0:
            total += 20 * scorer.scale
            continue
        required = math.ceil(need / size)
        closeness = 10 - (size * required - need) - Fraction(required - 1, 2)
        multi = (view.instance_multiplier_pool_first or 1) if attribute == "sockets" else 1
        if view.quantity - view.consumed >= required * multi:
            total += int(max(Fraction(0), closeness) * 2 * scorer.scale)
    return total


@SETTINGS
@given(varied_jobs(), st.sampled_from(sorted(PROFILES)))
def test_a_pools_sizing_points_are_those_of_each_attribute_of_the_plan_in_turn(
    payload: dict[str, Any], rules: str
) -> None:
    payload["rules"] = rules
    inp = _attach_input(payload)
    wants = _needs(inp).wants
    scorer = Scorer(inp.consumer, wants, inp.profile)
    unsized = Scorer(inp.consumer, wants, inp.profile)
    for i, pool in enumerate(inp.pools):
        view = view_pool(pool, i)
        without_sizes = unsized.score(view, {})
        plan_twenties = 20 * unsized.scale * len(inp.profile.sizing_attributes(inp.consumer))
        assert scorer.score(view) == (
            without_sizes - plan_twenties + _sizing_points_by_plan(scorer, view)
        )


_NUMBERS = ["1", "16", "-1", "0", "x", " 4", "4 ", "unlimited", " Unlimited", "٣", "", None]
_NUMBER_NAMES = ["sockets", "cores", "guest_limit", "virt_limit", "instance_multiplier", "arch"]


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.integers(-3, 5),
            # The pool's own attributes are often empty: the product's are then all read.
            st.one_of(
                st.just({}),
                st.dictionaries(st.sampled_from(_NUMBER_NAMES), st.sampled_from(_NUMBERS)),
            ),
            st.dictionaries(st.sampled_from(_NUMBER_NAMES), st.sampled_from(_NUMBERS)),
        ),
        min_size=1,
        max_size=4,
    )
)
@example([(1, {}, {"virt_limit": "x"})])
@example([(1, {}, {"guest_limit": "-1", "virt_limit": "unlimited", "cores": "x"})])
def test_checking_a_pool_list_logs_what_checking_each_pool_logs(
    drawn: list[tuple[int, dict[str, str | None], dict[str, str | None]]],
) -> None:
    pools = [
        Pool(id=f"p{i}", product_id="sku", quantity=q, attributes=own, product_attributes=prod)
        for i, (q, own, prod) in enumerate(drawn)
    ]
    together = ProblemLog.new()
    check_pools(pools, "pools", together)
    each = ProblemLog.new()
    for i, pool in enumerate(pools):
        check_pool(pool, f"pools[{i}]", each)
    assert together.problems == each.problems


def _totals(tally: Tally) -> tuple[object, ...]:
    return (
        tally.totals,
        tally.has,
        tally.arch_has,
        tally.arch_bad,
        tally.host_restricted,
        tally.limit_has,
    )


def _stack_pool(pool_id: str, sizes: dict[str, str]) -> dict[str, Any]:
    attrs = {"stacking_id": "s1", "multi-entitlement": "yes", **sizes}
    return {
        "id": pool_id,
        "product_id": "sku",
        "quantity": 10,
        "product_attributes": attrs,
        "provided_products": ["p1"],
    }


# Extra-attribute removal keeps pool b alone: it covers the cores, and without a pool
# carrying sockets the stack no longer enforces them.
_EXTRA = {
    "consumer": {
        "uuid": "c",
        "facts": {"cpu.cpu_socket(s)": "8", "cpu.core(s)_per_socket": "4"},
        "installed_products": ["p1"],
    },
    "pools": [
        _stack_pool("a", {"sockets": "8", "cores": "32"}),
        _stack_pool("b", {"cores": "32"}),
    ],
    "rules": "candlepin-5.42",
}


@SETTINGS
@given(varied_jobs())
@example(_EXTRA)
def test_a_stacks_carried_tally_is_the_tally_of_its_pools_after_every_step(
    payload: dict[str, Any],
) -> None:
    inp = _attach_input(payload)
    ctx = CoverageContext(inp.consumer)
    needs = _needs(inp)
    scorer = Scorer(inp.consumer, needs.wants, inp.profile)
    partial = inp.compliance.partial_stacks
    server = inp.profile.reads_like_the_server
    offers = read_offers(inp.pools, needs, partial, False, server)
    members, _, _ = _members(inp, offers, scorer, ctx)
    attached = _attached(ctx, inp.compliance)
    for group in build_groups(members, ctx, attached, scorer.scale):
        if not group.stackable:
            continue
        for step in (group.validate, group.remove_extra_attributes, group.prune):
            step()
            recounted = attached.stack_tally(ctx, group.stack_id)
            for m in group.members:
                recounted.add(m.unit, m.available)
            assert _totals(group._members_tally()) == _totals(recounted)


_SIZE_READINGS = ["1", "2", "4", "8", "0", None]


@SETTINGS
@given(
    st.fixed_dictionaries(
        {
            "cpu.cpu_socket(s)": st.sampled_from(["1", "2", "4", "8"]),
            "cpu.core(s)_per_socket": st.sampled_from(["1", "2", "4"]),
            "memory.memtotal": st.sampled_from(["2097152", "8388608"]),
            "band.storage.usage": st.sampled_from(["1", "4"]),
            "virt.is_guest": st.sampled_from(["true", "false"]),
        }
    ),
    st.lists(
        st.dictionaries(
            st.sampled_from(["sockets", "cores", "ram", "vcpu", "storage_band", "guest_limit"]),
            st.sampled_from(_SIZE_READINGS),
        ),
        min_size=2,
        max_size=12,
    ),
)
def test_pools_that_write_the_same_sizes_are_filtered_as_each_pool_read_alone(
    facts: dict[str, str], sizes: list[dict[str, str | None]]
) -> None:
    # Non-stacked pools differing only in their sizes: the model check reads the size
    # filters once per combination of sizes as written, so pools share its answers.
    job: AutoAttachJob = checked("auto_attach", {"consumer": {"uuid": "c", "facts": facts}})
    consumer = consumer_profile(job.consumer)
    check = PoolFilters(
        consumer, at=NOW, host_uuid=None, attached_pool_ids=frozenset(), below_multiplier=False
    )
    for i, attrs in enumerate(sizes):
        view = view_pool(
            Pool(id=f"p{i}", product_id="sku", quantity=5, product_attributes=attrs), i
        )
        available = currently_available(view, consumer)
        plain = drop_reason(
            view,
            consumer,
            at=NOW,
            host_uuid=None,
            attached_pool_ids=frozenset(),
            available=available,
            below_multiplier=False,
        )
        assert check.check_model(view.model) == (available, plain)
