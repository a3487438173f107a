"""What the consumer needs: the products to cover, the role and addons not yet provided,
and what the priorities count as satisfied (seed steps 2–3, rules.js ``select_pools``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from apportion.attach.compliance import AttachedEntitlement, ComplianceView
from apportion.attach.facts import ConsumerProfile
from apportion.attach.priority import RuleProfile, Wants

Offer = tuple[str, str]  # ("product" | "role" | "addon", value)

_NOTHING: frozenset[str] = frozenset()
_PURPOSE = ("roles", "addons", "support_level", "usage", "support_type")


@dataclass(frozen=True, slots=True)
class Needs:
    """The consumer's needs for one attach.

    ``needed`` drives the groups kept and the greedy selection. ``roles``/``addons`` are
    all the consumer's (lower case): the candlepin-* profiles keep, when pruning, the
    pools that carry them even once an attached entitlement provides them, and the
    server offers the rules every pool matching them (rules.js ``prune_pools`` and
    ``CandlepinPoolManager.getBestPools`` read the consumer's, not what is left).
    """

    to_cover: tuple[str, ...]
    wants: Wants
    needed: frozenset[Offer]
    roles: frozenset[str]
    addons: frozenset[str]

    def products(self) -> frozenset[str]:
        return frozenset(v for kind, v in self.needed if kind == "product")

    def still_needed(self, kind: str) -> frozenset[str]:
        return frozenset(v for k, v in self.needed if k == kind)


def _lower(value: str | None) -> frozenset[str]:
    return _NOTHING if value is None else frozenset({value.strip().lower()})


def products_to_cover(
    products: Sequence[str] | None, consumer: ConsumerProfile, compliance: ComplianceView
) -> list[str]:
    compliant = set(compliance.compliant)
    source = products if products is not None else consumer.installed
    return [pid for pid in dict.fromkeys(source) if pid not in compliant]


def needs_of(
    consumer: ConsumerProfile,
    to_cover: Sequence[str],
    compliance: ComplianceView,
    own_entitlements: Sequence[AttachedEntitlement],
    at: datetime,
    profile: RuleProfile,
) -> Needs:
    """Products: specified = installed plus those to cover (the server adds the products
    to cover to the installed list); unsatisfied = those not compliant. A role or addon is
    still needed unless an attached entitlement provides it (see :func:`_satisfied`)."""
    compliant = set(compliance.compliant)
    products = list(dict.fromkeys([*consumer.installed, *to_cover]))
    specified = {
        "products": frozenset(products),
        "roles": _lower(consumer.role),
        "addons": frozenset(a.lower() for a in consumer.addons),
        "support_level": _lower(consumer.service_level),
        "usage": _lower(consumer.usage),
        "support_type": _lower(consumer.service_type),
    }
    attached = list(compliance.attached)
    if not profile.reads_like_the_server:
        attached += [e for e in own_entitlements if e.active(at)]
    provided, satisfied = _satisfied(attached, profile)
    unsatisfied = {
        name: values - satisfied.get(name, _NOTHING) for name, values in specified.items()
    }
    unsatisfied["products"] = frozenset(p for p in products if p not in compliant)
    needed: set[Offer] = {("product", p) for p in to_cover}
    needed |= {("role", r) for r in specified["roles"] - provided["roles"]}
    needed |= {("addon", a) for a in specified["addons"] - provided["addons"]}
    return Needs(
        tuple(to_cover),
        Wants(unsatisfied, specified),
        frozenset(needed),
        specified["roles"],
        specified["addons"],
    )


def _satisfied(
    attached: Sequence[AttachedEntitlement], profile: RuleProfile
) -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]]]:
    """The roles and addons the attached entitlements provide (then no longer needed),
    and the syspurpose values the priorities count as satisfied.

    candlepin-* profiles, as rules.js: the attached entitlements are those of the
    compliance status's maps; a role or addon is provided when it is among a pool's
    comma-separated values, but the priorities count a pool's attribute as one value, as
    written (lower-cased), in every syspurpose category — so a pool with addons "A,B"
    satisfies neither "a" nor "b" for the priorities, and an attached service level is no
    longer unsatisfied. ``seed``: the job's own entitlements active at the check time
    count too (an entitlement providing only a role appears in no compliance map),
    values are split alike for both uses, and service level, usage and service type are
    never satisfied.
    """
    roles: set[str] = set()
    addons: set[str] = set()
    for ent in attached:
        roles |= ent.view.roles
        addons |= ent.view.addons
    provided = {"roles": frozenset(roles), "addons": frozenset(addons)}
    if not profile.reads_like_the_server:
        return provided, provided
    satisfied = {
        name: frozenset(raw.lower() for e in attached if (raw := e.view.purpose[i]) is not None)
        for i, name in enumerate(_PURPOSE)
    }
    return provided, satisfied
