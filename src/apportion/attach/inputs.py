"""Reading an attach job: limits first, then every field check, then the read views.

Everything a user controls is bounded by :class:`~apportion.limits.Limits` before any
work is done; field problems are collected so one rejection lists them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from apportion.attach.columns import PoolColumns
from apportion.attach.compliance import (
    AttachedEntitlement,
    ComplianceView,
    CoverageContext,
    attached_entitlement,
    compute_compliance,
    given_compliance,
)
from apportion.attach.facts import ConsumerProfile, consumer_profile
from apportion.attach.pools import (
    PoolView,
    as_utc,
    check_pool,
    check_pools,
    view_pool,
    view_pools,
)
from apportion.attach.priority import RuleProfile
from apportion.attach.values import ProblemLog, key_path
from apportion.contracts.attach import Compliance, Consumer, Entitlement, Pool
from apportion.errors import Problem, Rejected
from apportion.limits import Limits, env_name, over_limit

_MAX_REPORTED = 100


@dataclass(frozen=True, slots=True)
class AttachInput:
    """An attach job as the engines read it: checked, and its consumer, compliance and
    entitlements made into views (auto_attach builds one; guest_host_attach two)."""

    consumer: ConsumerProfile
    pools: Sequence[Pool | PoolView]  # already checked; read lazily when given as Pool
    products: Sequence[str] | None
    compliance: ComplianceView
    entitlements: Sequence[AttachedEntitlement]
    at: datetime
    profile: RuleProfile
    consider_derived: bool = False
    host_uuid: str | None = None
    # Whether to build the explanation (heal_org builds it only for the consumers asked).
    explain: bool = True
    # heal_org: every pool's values read once for all its consumers. Then ``pools`` are
    # views whose position is their place in these columns, each on date with quantity
    # left and past the filters that read only the consumer's facts (Estate.relevant).
    columns: PoolColumns | None = None


def reject_if(log: ProblemLog) -> None:
    if not log:
        return
    raise Rejected.of(log.problems[:_MAX_REPORTED], found=len(log.problems))


def _too_many(path: str, count: int, limit: int, what: str) -> Rejected:
    field = "max_products" if what.endswith("products") else f"max_{what}"
    return over_limit(
        field,
        Problem(
            path, f"{count} {what} exceed the limit of {limit} per job (raise {env_name(field)})"
        ),
    )


def check_limits(
    limits: Limits,
    *,
    consumers: Sequence[tuple[str, Consumer]],
    pools: tuple[str, Sequence[Pool]],
    entitlements: Sequence[tuple[str, Sequence[Entitlement]]],
    products: tuple[str, Sequence[str] | None] | None = None,
) -> None:
    """Refuse a job whose sizes exceed the configured limits (before any work).

    The product lists of each pool are bounded while the pools are checked
    (:func:`check_pool_list`, :func:`read_pools`), and a given compliance status by
    :func:`check_compliance_limit` right after, so the first limit exceeded, in this
    order, is the one reported.
    """
    path, pool_list = pools
    if len(pool_list) > limits.max_pools:
        raise _too_many(path, len(pool_list), limits.max_pools, "pools")
    for cpath, consumer in consumers:
        if len(consumer.installed_products) > limits.max_products:
            raise _too_many(
                f"{cpath}.installed_products",
                len(consumer.installed_products),
                limits.max_products,
                "installed products",
            )
    if products is not None and products[1] is not None and len(products[1]) > limits.max_products:
        raise _too_many(products[0], len(products[1]), limits.max_products, "products")
    for epath, ents in entitlements:
        if len(ents) > limits.max_entitlements:
            raise _too_many(epath, len(ents), limits.max_entitlements, "entitlements")


def check_compliance_limit(limits: Limits, path: str, compliance: Compliance | None) -> None:
    """Refuse a given compliance status listing more entitlements than the limit."""
    if compliance is None:
        return
    tables = (
        compliance.compliant_products,
        compliance.partially_compliant_products,
        compliance.partial_stacks,
    )
    count = sum(len(ents) for table in tables for ents in table.values())
    if count > limits.max_entitlements:
        raise _too_many(path, count, limits.max_entitlements, "entitlements")


def read_consumer(consumer: Consumer, path: str, log: ProblemLog) -> ConsumerProfile:
    return consumer_profile(consumer, path, log)


def read_pools(
    pools: Sequence[Pool], path: str, log: ProblemLog, limits: Limits | None = None
) -> list[PoolView]:
    """Check and read every pool (guest_host_attach filters all of them for two consumers)."""
    return view_pools(pools, path, log, None if limits is None else limits.max_products)


def check_pool_list(
    pools: Sequence[Pool], path: str, log: ProblemLog, limits: Limits
) -> Sequence[Pool]:
    """Check every pool; auto_attach reads only those that can matter (see run_attach)."""
    check_pools(pools, path, log, limits.max_products)
    return pools


def read_entitlements(
    ents: Sequence[Entitlement], path: str, log: ProblemLog
) -> list[AttachedEntitlement]:
    for i, ent in enumerate(ents):
        check_pool(ent.pool, f"{path}[{i}].pool", log)
    if log:
        return []
    return [attached_entitlement(ent, view_pool(ent.pool, -1)) for ent in ents]


def _map_entitlements(
    compliance: Compliance, path: str, log: ProblemLog
) -> dict[str, list[AttachedEntitlement]]:
    tables = {
        "partial_stacks": compliance.partial_stacks,
        "partially_compliant_products": compliance.partially_compliant_products,
        "compliant_products": compliance.compliant_products,
    }
    out: dict[str, list[AttachedEntitlement]] = {}
    for name, table in tables.items():
        for key, ents in table.items():
            base = key_path(f"{path}.{name}", key)
            out[f"{name}:{key}"] = read_entitlements(ents, base, log)
    return out


def read_compliance(
    compliance: Compliance | None,
    consumer: ConsumerProfile,
    entitlements: Sequence[AttachedEntitlement],
    at: datetime,
    path: str,
    log: ProblemLog,
) -> ComplianceView:
    """The job's compliance maps, or the status computed from its entitlements."""
    if compliance is None:
        return compute_compliance(CoverageContext(consumer), consumer.installed, entitlements, at)
    views = _map_entitlements(compliance, path, log)
    reject_if(log)
    return given_compliance(compliance, consumer.installed, views)


def check_time(at: datetime | None, now: datetime) -> datetime:
    moment = as_utc(at if at is not None else now)
    assert moment is not None
    return moment
