"""What an attach job must be beyond its models' types, checked once at the edge.

The registry's attach entries name these checks (``JobKind.check``): the engine runs a
job's check once, after its model has read it and before its solver, so the attach
engines read plain, valid data and check nothing again. Checked here:

* sizes against the deployment's :class:`~apportion.limits.Limits`, before anything
  else; the first limit exceeded, in the order the checks run, is the one reported;
* pool attributes that are whole numbers written as text, and quantities of −1
  (unlimited) or at least 0. Candlepin keeps every attribute a string and its rules read
  them with JavaScript's loose conversions: a size that is not a number would silently
  disable a check there (``parseInt("abc")`` is NaN, and every comparison with NaN is
  false) or loop forever (an unlimited pool whose size parses to 0);
* consumer facts that are read as numbers (facts may carry decimals, e.g. TB);
* one field against another: pool ids unique, requested pools among the pools, a guest
  that says it is one and is not its own host.

Field problems are collected so that one rejection lists them all, each at the JSON path
of its field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from apportion.contracts.attach import (
    AutoAttachJob,
    Compliance,
    Consumer,
    Entitlement,
    GuestHostAttachJob,
    Pool,
)
from apportion.contracts.heal import CheckedHealOrg, HealConsumer, HealOrgJob
from apportion.errors import Problem, Rejected
from apportion.limits import Limits, env_name, over_limit

# The facts read as numbers, and the one that says a consumer is a guest.
SOCKET_FACT = "cpu.cpu_socket(s)"
CORES_FACT = "cpu.core(s)_per_socket"
RAM_FACT = "memory.memtotal"
BAND_FACT = "band.storage.usage"
GUEST_FACT = "virt.is_guest"
_NUMBER_FACTS = (SOCKET_FACT, CORES_FACT, RAM_FACT, BAND_FACT)

# virt_limit's word for no limit (any case, surrounding spaces allowed).
UNLIMITED = "unlimited"
# Whole-number attributes and whether "-1" is allowed (guest_limit: unlimited guests).
_NUMERIC = {
    "sockets": False,
    "cores": False,
    "ram": False,
    "vcpu": False,
    "storage_band": False,
    "instance_multiplier": False,
    "guest_limit": True,
}
_CHECKED = frozenset((*_NUMERIC, "virt_limit"))

_WHOLE = re.compile(r"\s*\d+\s*\Z", re.ASCII)
_DECIMAL = re.compile(r"\s*\d+(?:\.\d+)?\s*\Z", re.ASCII)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MAX_REPORTED = 100


def key_path(base: str, key: str) -> str:
    """``base.key`` for plain keys, ``base["key"]`` for keys such as ``cpu.cpu_socket(s)``."""
    if _IDENTIFIER.match(key):
        return f"{base}.{key}"
    escaped = key.replace("\\", "\\\\").replace('"', '\\"')
    return f'{base}["{escaped}"]'


def says_guest(consumer: Consumer) -> bool:
    """Whether the consumer's facts say it is a virtual guest (Candlepin's
    ``equalsIgnoreCase("true", value)``)."""
    raw = consumer.facts.get(GUEST_FACT)
    return raw is not None and raw.lower() == "true"


@dataclass(slots=True)
class ProblemLog:
    """Collects every problem of a job so that one rejection lists them all."""

    problems: list[Problem]

    @classmethod
    def new(cls) -> ProblemLog:
        return cls([])

    def add(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def __bool__(self) -> bool:
        return bool(self.problems)


def reject_if(log: ProblemLog) -> None:
    if not log:
        return
    raise Rejected.of(log.problems[:_MAX_REPORTED], found=len(log.problems))


# ---- sizes against the limits ---------------------------------------------------------


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
    """Refuse a job whose sizes exceed the configured limits (before any other check).

    The product lists of each pool are bounded while the pools are checked
    (:func:`check_pools`), and a given compliance status by
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


def _check_product_lists(pool: Pool, path: str, limit: int) -> None:
    for name, listed in (
        ("provided_products", pool.provided_products),
        ("derived_provided_products", pool.derived_provided_products),
    ):
        if len(listed) > limit:
            raise over_limit(
                "max_products",
                Problem(
                    f"{path}.{name}",
                    f"{len(listed)} products exceed the limit of {limit} per job "
                    f"(raise {env_name('max_products')})",
                ),
            )


# ---- numbers written as text ----------------------------------------------------------


def _whole_number(
    raw: str,
    path: str,
    log: ProblemLog,
    *,
    allow_minus_one: bool = False,
    allow_unlimited: bool = False,
) -> None:
    """Log ``raw`` unless it is a non-negative whole number (``-1`` where it means
    unlimited; the word ``unlimited`` is let through by the caller where it is allowed)."""
    if allow_minus_one and raw.strip() == "-1":
        return
    if not _WHOLE.match(raw):
        expected = "a non-negative whole number"
        if allow_minus_one:
            expected += " or -1 (unlimited)"
        elif allow_unlimited:
            expected += ' or "unlimited"'
        log.add(path, f"must be {expected}, got {raw!r}")


def _check_numbers(attrs: Mapping[str, str | None], path: str, field: str, log: ProblemLog) -> None:
    for name, raw in attrs.items():
        if raw is None:
            continue
        minus_one = _NUMERIC.get(name)
        if minus_one is not None:
            if not ((raw.isascii() and raw.isdigit()) or (minus_one and raw == "-1")):
                where = key_path(f"{path}.{field}", name)
                _whole_number(raw, where, log, allow_minus_one=minus_one)
        elif name == "virt_limit" and raw.strip().lower() != UNLIMITED:
            _whole_number(raw, key_path(f"{path}.{field}", name), log, allow_unlimited=True)


def _clean_numbers(attrs: Mapping[str, str | None]) -> bool:
    # One pass over the few items (no set built for the names checked).
    for name, raw in attrs.items():
        if name in _CHECKED and not (raw is None or (raw.isascii() and raw.isdigit())):
            if name == "virt_limit":
                if raw.strip().lower() != UNLIMITED:
                    return False
            elif not (_NUMERIC[name] and raw == "-1"):
                return False
    return True


def check_pool(pool: Pool, path: str, log: ProblemLog) -> None:
    """Field checks the wire model cannot express (sizes, quantity −1 or ≥ 0)."""
    if pool.quantity < -1:
        log.add(f"{path}.quantity", "must be -1 (unlimited) or a quantity of at least 0")
    if pool.attributes:
        _check_numbers(pool.attributes, path, "attributes", log)
    if pool.product_attributes:
        _check_numbers(pool.product_attributes, path, "product_attributes", log)
    if pool.derived_product_attributes:
        _check_numbers(pool.derived_product_attributes, path, "derived_product_attributes", log)


def check_pools(
    pools: Sequence[Pool], path: str, log: ProblemLog, max_products: int | None = None
) -> None:
    """Check a list of pools; duplicate ids are problems too.

    With ``max_products``, a pool listing more (derived) provided products than that is
    refused at once with ``limit_exceeded`` (:class:`Rejected`), before any other problem.
    """
    seen: dict[str, int] = {}
    remember = seen.setdefault
    for i, pool in enumerate(pools):
        previous = remember(pool.id, i)
        if previous != i:
            log.add(f"{path}[{i}].id", f"duplicate pool id {pool.id!r} (also {path}[{previous}])")
        if max_products is not None and (
            len(pool.provided_products) > max_products
            or len(pool.derived_provided_products) > max_products
        ):
            _check_product_lists(pool, f"{path}[{i}]", max_products)
        # Inlined check_pool for the common case of clean values (thousands of pools):
        # the product's attributes of a pool are read here without a call; a value that
        # is not all digits leaves the decision to check_pool ("-1" and "unlimited" are
        # allowed where due).
        clean = pool.quantity >= -1
        if clean:
            for name, raw in pool.product_attributes.items():
                if name in _CHECKED and not (raw is None or (raw.isascii() and raw.isdigit())):
                    clean = False
                    break
        if (
            not clean
            or ((attrs := pool.attributes) and not _clean_numbers(attrs))
            or ((attrs := pool.derived_product_attributes) and not _clean_numbers(attrs))
        ):
            check_pool(pool, f"{path}[{i}]", log)


def check_entitlements(ents: Sequence[Entitlement], path: str, log: ProblemLog) -> None:
    for i, ent in enumerate(ents):
        check_pool(ent.pool, f"{path}[{i}].pool", log)


def _check_compliance(compliance: Compliance, path: str, log: ProblemLog) -> None:
    """The pools of a given compliance status's entitlements, map by map."""
    tables = {
        "partial_stacks": compliance.partial_stacks,
        "partially_compliant_products": compliance.partially_compliant_products,
        "compliant_products": compliance.compliant_products,
    }
    for name, table in tables.items():
        for key, ents in table.items():
            check_entitlements(ents, key_path(f"{path}.{name}", key), log)


def check_facts(consumer: Consumer, path: str, log: ProblemLog) -> None:
    """The facts read as numbers: non-negative, decimals allowed. An absent or empty fact
    is not read (JavaScript truthiness: the reference falls back to its default)."""
    facts = consumer.facts
    for name in _NUMBER_FACTS:
        raw = facts.get(name)
        if raw and not _DECIMAL.match(raw):
            log.add(key_path(f"{path}.facts", name), f"must be a non-negative number, got {raw!r}")


# ---- the kinds ------------------------------------------------------------------------


def check_auto_attach(job: AutoAttachJob, limits: Limits) -> AutoAttachJob:
    """An auto_attach job as its engine reads it (the same job, checked)."""
    check_limits(
        limits,
        consumers=[("consumer", job.consumer)],
        pools=("pools", job.pools),
        entitlements=[("entitlements", job.entitlements)],
        products=("products", job.products),
    )
    log = ProblemLog.new()
    check_facts(job.consumer, "consumer", log)
    check_pools(job.pools, "pools", log, limits.max_products)
    check_compliance_limit(limits, "compliance", job.compliance)
    check_entitlements(job.entitlements, "entitlements", log)
    reject_if(log)
    if job.compliance is not None:
        _check_compliance(job.compliance, "compliance", log)
        reject_if(log)
    return job


def check_guest_host_attach(job: GuestHostAttachJob, limits: Limits) -> GuestHostAttachJob:
    """A guest_host_attach job as its engine reads it (the same job, checked)."""
    check_limits(
        limits,
        consumers=[("guest", job.guest), ("host", job.host)],
        pools=("pools", job.pools),
        entitlements=[
            ("host_entitlements", job.host_entitlements),
            ("guest_entitlements", job.guest_entitlements),
        ],
        products=("requested_pools", job.requested_pools),
    )
    log = ProblemLog.new()
    check_facts(job.guest, "guest", log)
    check_facts(job.host, "host", log)
    check_pools(job.pools, "pools", log, limits.max_products)
    check_entitlements(job.host_entitlements, "host_entitlements", log)
    check_entitlements(job.guest_entitlements, "guest_entitlements", log)
    if job.guest.uuid == job.host.uuid:
        # The derived pools would require the guest as its own host (requires_host).
        log.add("guest.uuid", f"a guest cannot be its own host: host.uuid is {job.host.uuid!r} too")
    known = {p.id for p in job.pools}
    for i, pid in enumerate(job.requested_pools or []):
        if pid not in known:
            log.add(f"requested_pools[{i}]", f"no pool with id {pid!r} in pools")
    reject_if(log)
    if not says_guest(job.guest):
        raise Rejected.at(
            key_path("guest.facts", GUEST_FACT),
            'the guest must be a virtual guest: set the fact "virt.is_guest" to "true"',
        )
    return job


def _check_consumer_count(job: HealOrgJob, limits: Limits) -> None:
    count = len(job.consumers)
    if count > limits.max_heal_consumers:
        field = "max_heal_consumers"
        raise over_limit(
            field,
            Problem(
                "consumers",
                f"{count} consumers exceed the limit of {limits.max_heal_consumers} per job "
                f"(raise {env_name(field)}, or split the organisation into several jobs)",
            ),
        )


def _check_heal_consumer(entry: HealConsumer, path: str, limits: Limits) -> None:
    """A consumer entry's own fields, as auto_attach checks its consumer's."""
    check_limits(
        limits,
        consumers=[(f"{path}.consumer", entry.consumer)],
        pools=("pools", ()),
        entitlements=[(f"{path}.entitlements", entry.entitlements)],
        products=(f"{path}.products", entry.products),
    )
    log = ProblemLog.new()
    check_facts(entry.consumer, f"{path}.consumer", log)
    check_entitlements(entry.entitlements, f"{path}.entitlements", log)
    reject_if(log)


def check_heal_org(job: HealOrgJob, limits: Limits) -> CheckedHealOrg:
    """A heal_org job as its engine reads it. The consumer count and the shared pools
    reject the whole job; a consumer entry's own problems are that consumer's rejection,
    which the loop answers in its turn."""
    _check_consumer_count(job, limits)
    check_limits(limits, consumers=[], pools=("pools", job.pools), entitlements=[])
    log = ProblemLog.new()
    check_pools(job.pools, "pools", log, limits.max_products)
    reject_if(log)
    rejected: dict[int, Rejected] = {}
    for index, entry in enumerate(job.consumers):
        try:
            _check_heal_consumer(entry, f"consumers[{index}]", limits)
        except Rejected as exc:
            rejected[index] = exc
    return CheckedHealOrg(job, rejected)
