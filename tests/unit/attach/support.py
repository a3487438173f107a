"""Builders for attach jobs (snake_case wire form) and runners, shared by this area's tests."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from apportion import kinds
from apportion.attach import solve_auto_attach, solve_guest_host_attach
from apportion.attach.autoattach import pool_priorities
from apportion.attach.compliance import attached_entitlements, read_compliance
from apportion.attach.facts import consumer_profile
from apportion.attach.inputs import AttachInput
from apportion.attach.pools import view_pool
from apportion.attach.priority import PROFILES
from apportion.contracts.attach import (
    AutoAttachJob,
    AutoAttachResult,
    GuestHostAttachJob,
)
from apportion.engine import Context

NOW = datetime(2026, 6, 1, tzinfo=UTC)
CTX = Context(now=NOW)
PRODUCT = "a-product"


def pool(
    pool_id: str,
    product: str = PRODUCT,
    *,
    provided: tuple[str, ...] = (),
    quantity: int = 5,
    consumed: int = 0,
    attrs: dict[str, Any] | None = None,
    pattrs: dict[str, Any] | None = None,
    start: str | None = "2009-11-30T00:00:00Z",
    end: str | None = "2036-11-30T00:00:00Z",
    derived: str | None = None,
    derived_provided: tuple[str, ...] = (),
    derived_pattrs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A pool the way Candlepin's TestUtil.createPool makes one (quantity 5 by default)."""
    out: dict[str, Any] = {
        "id": pool_id,
        "product_id": product,
        "quantity": quantity,
        "consumed": consumed,
        "start_date": start,
        "end_date": end,
        "attributes": attrs or {},
        "product_attributes": pattrs or {},
        "provided_products": list(provided),
    }
    if derived is not None:
        out["derived_product_id"] = derived
        out["derived_provided_products"] = list(derived_provided)
        out["derived_product_attributes"] = derived_pattrs or {}
    return out


def stacking(stack_id: str, sockets: str | None = None, **more: str) -> dict[str, str]:
    """Product attributes of a multi-entitlement stackable product."""
    out = {"stacking_id": stack_id, "multi-entitlement": "yes", **more}
    if sockets is not None:
        out["sockets"] = sockets
    return out


def syspurpose(
    roles: str | None = None,
    addons: str | None = None,
    sla: str | None = None,
    usage: str | None = None,
) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in (
        ("roles", roles),
        ("addons", addons),
        ("support_level", sla),
        ("usage", usage),
    ):
        if value is not None:
            out[name] = value
    return out


def consumer(
    *,
    uuid: str = "consumer-1",
    sockets: str | None = None,
    cores: str | None = None,
    ram: str | None = None,
    arch: str | None = None,
    guest: bool = False,
    installed: tuple[str, ...] = (),
    role: str | None = None,
    addons: tuple[str, ...] = (),
    sla: str | None = None,
    usage: str | None = None,
    service_type: str | None = None,
    active_guests: int = 0,
    ctype: str = "system",
    facts: dict[str, str] | None = None,
) -> dict[str, Any]:
    f: dict[str, str] = dict(facts or {})
    for name, value in (
        ("cpu.cpu_socket(s)", sockets),
        ("cpu.core(s)_per_socket", cores),
        ("memory.memtotal", ram),
        ("uname.machine", arch),
    ):
        if value is not None:
            f[name] = value
    if guest:
        f["virt.is_guest"] = "true"
        f.setdefault("virt.uuid", uuid)
    out: dict[str, Any] = {
        "uuid": uuid,
        "type": ctype,
        "facts": f,
        "installed_products": list(installed),
        "addons": list(addons),
        "guest_ids": [
            {"guest_id": f"g{i}", "attributes": {"virtWhoType": "libvirt", "active": "1"}}
            for i in range(active_guests)
        ],
    }
    for name, value in (
        ("role", role),
        ("service_level", sla),
        ("usage", usage),
        ("service_type", service_type),
    ):
        if value is not None:
            out[name] = value
    return out


def ent(ent_id: str, of_pool: dict[str, Any], quantity: int = 1) -> dict[str, Any]:
    return {"id": ent_id, "pool": of_pool, "quantity": quantity}


def job(
    cons: dict[str, Any],
    pools: list[dict[str, Any]],
    products: list[str] | None = None,
    *,
    rules: str = "candlepin-5.42",
    compliance: dict[str, Any] | None = None,
    entitlements: list[dict[str, Any]] | None = None,
    host_uuid: str | None = None,
    at: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "consumer": cons,
        "products": products,
        "pools": pools,
        "rules": rules,
        "entitlements": entitlements or [],
    }
    if compliance is not None:
        out["compliance"] = compliance
    if host_uuid is not None:
        out["host_uuid"] = host_uuid
    if at is not None:
        out["at"] = at
    return out


def checked(kind: str, payload: dict[str, Any]) -> Any:
    """The job as the engine is given it: validated by its model, then its kind's check."""
    spec = kinds.get(kind)
    return spec.checked(spec.job.model_validate(payload), CTX.limits)


def attach(payload: dict[str, Any]) -> AutoAttachResult:
    job: AutoAttachJob = checked("auto_attach", payload)
    return solve_auto_attach(job, CTX)


def chosen(payload: dict[str, Any]) -> dict[str, int]:
    return attach(payload)["pool_quantities"]


def guest_attach(payload: dict[str, Any]) -> dict[str, Any]:
    job: GuestHostAttachJob = checked("guest_host_attach", payload)
    return solve_guest_host_attach(job, CTX)


def priorities(payload: dict[str, Any]) -> dict[str, Fraction]:
    """Each pool's priority for the job's consumer (Candlepin's get_pool_priority_test)."""
    parsed: AutoAttachJob = checked("auto_attach", payload)
    cons = consumer_profile(parsed.consumer)
    ents = attached_entitlements(parsed.entitlements)
    compliance = read_compliance(parsed.compliance, cons, ents, NOW)
    inp = AttachInput(
        consumer=cons,
        pools=[view_pool(p, i) for i, p in enumerate(parsed.pools)],
        products=parsed.products,
        compliance=compliance,
        entitlements=ents,
        at=NOW,
        profile=PROFILES[parsed.rules],
    )
    return pool_priorities(inp)


def satisfied_role_compliance(role: str | None = None, addons: str | None = None) -> dict[str, Any]:
    """Compliance whose attached entitlement already provides ``role``/``addons``."""
    attrs = syspurpose(roles=role, addons=addons)
    satisfied = pool("satisfying-pool", "compliant-product1", pattrs=attrs)
    return {"compliant_products": {"compliant-product1": [ent("ent-sat", satisfied)]}}
