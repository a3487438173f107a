"""heal_org: auto_attach for every consumer of an organisation, in turn.

Candlepin's HealEntireOrgJob loops over the owner's consumers and auto-attaches each;
the bind raises each chosen pool's ``consumed``, so the next consumer sees less, and one
consumer's failure is logged while the loop goes on. This answers exactly what
auto_attach answers consumer by consumer in the given order, each job carrying the
pools' ``consumed`` as raised by the earlier consumers.

What the loop repeats is done once: the organisation's pools are read once (checked once
at the edge, where a bad pool rejects the whole job: every consumer shares it), and held
as columns (:mod:`.columns`): indexed by group (stack or pool), product, role and addon,
their priorities' terms, offers' readings and coverage units ready for every consumer. A
consumer's attach is given only the groups that can matter to it — those with a pool
providing a product it still needs, matching its role or one of its addons, or being one
of its partial stacks — and of those only the pools it can attach by what it is: valid
at the check time, quantity left, and past the filters that read only its facts (arch,
sizes, virt_only, physical_only, consumer type), decided once per class of facts.
auto_attach considers no other group (it leaves out every group offering nothing still
needed that is not a partial stack) and drops those pools, so its answer is the same.
Its explanation is built only for the consumers the job names in ``explain``, which are
given every pool (and no columns) so that it is their single job's, word for word.

A consumer's own problems (its facts, its entitlements, its sizes over the limits) are
found at the edge too (:func:`apportion.contracts.attach_checks.check_heal_org`): they
are that consumer's rejection, with paths under ``consumers[i]``, answered in its turn
while the loop goes on. A job whose JSON does not match the contract is rejected whole
at the edge, as any job is.

A long heal stops between two consumers, answering those healed so far and where it
stopped, when it has run ``heal_seconds`` or when one more answer could take the
envelope over ``max_envelope_bytes``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from apportion.attach.autoattach import run_attach
from apportion.attach.columns import PoolColumns
from apportion.attach.compliance import (
    AttachedEntitlement,
    ComplianceView,
    CoverageContext,
    attached_entitlements,
    compute_compliance,
)
from apportion.attach.facts import ConsumerProfile, consumer_profile
from apportion.attach.inputs import AttachInput
from apportion.attach.needs import products_to_cover
from apportion.attach.pools import PoolView, as_utc, at_or_now, view_pool
from apportion.attach.priority import PROFILES, RuleProfile
from apportion.attach.values import split_values
from apportion.codec import encode
from apportion.contracts.attach import Pool
from apportion.contracts.heal import (
    CheckedHealOrg,
    ComplianceSummary,
    HealConsumer,
    HealConsumerResult,
    HealOrgJob,
    HealOrgResult,
    HealSummary,
)
from apportion.errors import Rejected

if TYPE_CHECKING:
    from apportion.context import Context


class Estate:
    """The organisation's pools, read once and indexed, with ``consumed`` as it rises."""

    __slots__ = ("_live", "_views", "columns", "consumed", "pools")

    def __init__(self, pools: Sequence[Pool], at: datetime) -> None:
        self.pools = pools
        # Each pool's view as it stands (its consumed raised by the binds so far).
        self._views: list[PoolView] = [view_pool(pool, i) for i, pool in enumerate(pools)]
        # Whether a pool can still be attached by anyone: valid at the check time, with
        # quantity left. auto_attach drops the others whoever asks (its date and quantity
        # filters), so they are left out before its other, consumer-dependent, filters.
        self._live = np.array(
            [_on_date(pool, at) and not _used_up(pool.quantity, pool.consumed) for pool in pools],
            dtype=np.bool_,
        )
        self.columns = PoolColumns(self._views, [_purpose_values(pool) for pool in pools])
        # The consumed of every pool an earlier consumer attached, by position.
        self.consumed: dict[int, int] = {}

    def view(self, position: int) -> PoolView:
        return self._views[position]

    def relevant(
        self,
        consumer: ConsumerProfile,
        to_cover: Iterable[str],
        partial_stacks: Iterable[str],
    ) -> list[PoolView]:
        """The live pools of every group that can matter to the consumer, in input order,
        less those its facts can never attach (auto_attach drops them, whatever else)."""
        views = self._views
        positions = self.columns.relevant(consumer, to_cover, partial_stacks, self._live)
        return [views[p] for p in positions]

    def everything(self) -> list[PoolView]:
        return list(self._views)

    def attach(self, positions: dict[str, int], quantities: dict[str, int]) -> None:
        """The bind: raise each chosen pool's consumed by the quantity attached."""
        for pool_id, quantity in quantities.items():
            position = positions[pool_id]
            current = self._views[position]
            consumed = current.consumed + quantity
            self.consumed[position] = consumed
            self._views[position] = current._replace(consumed=consumed)
            self.columns.changed(position, current.quantity - consumed)
            if _used_up(current.quantity, consumed):
                self._live[position] = False


def _purpose_values(pool: Pool) -> tuple[frozenset[str], frozenset[str]]:
    """A pool's roles and addons as either reading finds them (the product's, the
    pool's): a superset of what the rules match is harmless, they check again."""
    pattrs, attrs = pool.product_attributes, pool.attributes
    roles = split_values(pattrs.get("roles")) | split_values(attrs.get("roles"))
    addons = split_values(pattrs.get("addons")) | split_values(attrs.get("addons"))
    return roles, addons


def _on_date(pool: Pool, at: datetime) -> bool:
    start, end = as_utc(pool.start_date), as_utc(pool.end_date)
    return (start is None or start <= at) and (end is None or end >= at)


def _used_up(quantity: int, consumed: int) -> bool:
    return quantity >= 0 and consumed >= quantity


def status(compliance: ComplianceView) -> ComplianceSummary:
    """Candlepin's ComplianceStatus: invalid while an installed product is not covered,
    partial while one is partly covered or a stack is incomplete, else valid."""
    if compliance.non_compliant:
        label = "invalid"
    elif compliance.partially_compliant or compliance.partial_stacks:
        label = "partial"
    else:
        label = "valid"
    return {
        "status": label,  # type: ignore[typeddict-item]
        "compliant_products": list(compliance.compliant),
        "partially_compliant_products": list(compliance.partially_compliant),
        "non_compliant_products": list(compliance.non_compliant),
        "partial_stacks": list(compliance.partial_stacks),
    }


@dataclass(frozen=True, slots=True)
class _Run:
    """What every consumer's attach shares."""

    estate: Estate
    positions: dict[str, int]
    at: datetime
    profile: RuleProfile
    explain: frozenset[str]


def _heal_one(run: _Run, entry: HealConsumer, index: int) -> HealConsumerResult:
    """One consumer's auto_attach over the estate as it stands."""
    consumer = consumer_profile(entry.consumer)
    entitlements = attached_entitlements(entry.entitlements)
    at = run.at
    compliance = compute_compliance(CoverageContext(consumer), consumer.installed, entitlements, at)
    to_cover = products_to_cover(entry.products, consumer, compliance)
    explain = entry.consumer.uuid in run.explain
    estate = run.estate
    # A consumer asked to be explained is given every pool, so that its explanation is
    # the single job's, word for word (what was dropped and why included).
    pools = (
        estate.everything()
        if explain
        else estate.relevant(consumer, to_cover, compliance.partial_stacks)
    )
    outcome = run_attach(
        AttachInput(
            consumer=consumer,
            pools=pools,
            products=entry.products,
            compliance=compliance,
            entitlements=entitlements,
            at=at,
            profile=run.profile,
            host_uuid=entry.host_uuid,
            explain=explain,
            # An explained consumer is given every pool (not only those live and
            # attachable by its class, which the columns path takes for granted).
            columns=None if explain else estate.columns,
        )
    )
    quantities = outcome.pool_quantities
    after = _after(consumer, entitlements, quantities, run, at)
    run.estate.attach(run.positions, quantities)
    answer: HealConsumerResult = {
        "index": index,
        "consumer": entry.consumer.uuid,
        "status": "ok",
        "pool_quantities": quantities,
        "covered_products": list(outcome.covered),
        "uncovered_products": list(outcome.uncovered),
        "compliance_before": status(compliance),
        "compliance_after": status(after),
    }
    if explain:
        answer["explanation"] = outcome.explanation
    return answer


def _after(
    consumer: ConsumerProfile,
    entitlements: Sequence[AttachedEntitlement],
    quantities: dict[str, int],
    run: _Run,
    at: datetime,
) -> ComplianceView:
    """The consumer's compliance with what it just attached (dated as its pools are)."""
    if not quantities:
        return compute_compliance(CoverageContext(consumer), consumer.installed, entitlements, at)
    estate, positions = run.estate, run.positions
    added = [
        AttachedEntitlement(
            id=f"heal:{pool_id}",
            view=estate.view(positions[pool_id]),
            quantity=quantity,
            start=None,
            end=None,
        )
        for pool_id, quantity in quantities.items()
    ]
    return compute_compliance(
        CoverageContext(consumer), consumer.installed, [*entitlements, *added], at
    )


def _rejection(index: int, entry: HealConsumer, exc: Rejected) -> HealConsumerResult:
    return {
        "index": index,
        "consumer": entry.consumer.uuid,
        "status": "rejected",
        "error": {
            "code": exc.code,
            "message": exc.message,
            "details": [{"path": p.path, "message": p.message} for p in exc.problems],
        },
    }


def solve_heal_org(checked: CheckedHealOrg, ctx: Context) -> HealOrgResult:
    """auto_attach for each consumer in order, each seeing what the earlier ones took
    (the job checked at the edge: :func:`apportion.contracts.attach_checks.check_heal_org`,
    which found each consumer's own rejection)."""
    job, rejected = checked.job, checked.rejected
    limits = ctx.limits
    # Wall time, read here rather than from ctx.now: a long loop stops in time and
    # answers what it has healed (heal_seconds), rather than being killed by the task's
    # soft time limit with nothing.
    started = time.monotonic()
    pools = job.pools
    at = at_or_now(job.at, ctx.now)
    estate = Estate(pools, at)
    run = _Run(
        estate=estate,
        positions={pool.id: i for i, pool in enumerate(pools)},
        at=at,
        profile=PROFILES[job.rules],
        explain=frozenset(job.explain),
    )
    answers: list[HealConsumerResult] = []
    stopped: tuple[int, str] | None = None
    size = _Size(limits.max_envelope_bytes)
    for index, entry in enumerate(job.consumers):
        if index and time.monotonic() - started > limits.heal_seconds:
            stopped = (index, "heal_seconds")
            break
        if index and not size.room():
            stopped = (index, "max_envelope_bytes")
            break
        before = len(estate.consumed)
        problem = rejected.get(index)
        if problem is None:
            answer = _heal_one(run, entry, index)
        else:
            answer = _rejection(index, entry, problem)
        answers.append(answer)
        size.add(answer, pools, list(estate.consumed)[before:])
        if ctx.progress is not None:
            ctx.progress(index + 1, len(job.consumers))
    consumed = {pools[p].id: value for p, value in sorted(estate.consumed.items())}
    return {
        "consumers": answers,
        "consumed": consumed,
        "summary": _summary(job, answers, estate, stopped),
    }


class _Size:
    """The answer's size as JSON so far, so that the loop stops before the envelope would
    be over ``max_envelope_bytes`` (the worker would answer it rejected/result_too_large,
    losing what was healed): the consumers healed until then are answered."""

    # The envelope around the result, the summary's counts, and room for the next
    # consumer: twice the largest answer so far.
    SLACK = 4096

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = self.SLACK
        self.largest = 0

    def add(self, answer: HealConsumerResult, pools: Sequence[Pool], touched: list[int]) -> None:
        size = len(encode(answer)) + 1
        self.largest = max(self.largest, size)
        # Each pool touched is in `consumed`, and may be in `pools_exhausted`.
        self.total += size + sum(2 * len(pools[p].id) + 32 for p in touched)

    def room(self) -> bool:
        return self.total + 2 * self.largest <= self.limit


def _summary(
    job: HealOrgJob,
    answers: list[HealConsumerResult],
    estate: Estate,
    stopped: tuple[int, str] | None,
) -> HealSummary:
    healed = already = still = rejected = attached = 0
    for answer in answers:
        if answer["status"] != "ok":
            rejected += 1
            continue
        before = answer["compliance_before"]["status"] == "valid"
        after = answer["compliance_after"]["status"] == "valid"
        already += before
        healed += after and not before
        still += not after
        attached += sum(answer["pool_quantities"].values())
    pools = estate.pools
    exhausted = [
        pools[p].id
        for p, value in sorted(estate.consumed.items())
        if pools[p].quantity >= 0 and value >= pools[p].quantity
    ]
    return {
        "consumers": len(job.consumers),
        "answered": len(answers),
        "healed": healed,
        "already_compliant": already,
        "still_not_compliant": still,
        "rejected": rejected,
        "entitlements_attached": attached,
        "pools_exhausted": exhausted,
        "complete": stopped is None,
        "stopped_at": None if stopped is None else stopped[0],
        "stopped_reason": None if stopped is None else stopped[1],
    }
