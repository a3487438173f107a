"""The consumer as the rules see it: sizes computed from facts, guest status, syspurpose.

Sizes follow the reference's FactValueCalculator exactly:

* sockets = ``cpu.cpu_socket(s)`` (1 when the fact is absent or empty);
* cores = ``cpu.core(s)_per_socket`` (1 when absent) × sockets; vcpu = cores;
* ram (GB) = round(``memory.memtotal`` KiB / 1024 / 1024), half rounded up, the KiB
  read as a whole number (1 when absent, which rounds to 0 GB);
* storage_band = ``band.storage.usage`` (1 when absent);
* guest_limit = the number of guest ids whose attributes say ``virtWhoType`` libvirt and
  ``active`` "1".

Numbers are kept as exact fractions so the priority arithmetic reproduces the
documented scores exactly (9028.5, not 9028.500000000002).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

from apportion.contracts.attach import Consumer
from apportion.contracts.attach_checks import (
    BAND_FACT,
    CORES_FACT,
    RAM_FACT,
    SOCKET_FACT,
    says_guest,
)

ARCH_FACT = "uname.machine"
VIRT_UUID_FACT = "virt.uuid"

# The attributes that decide whether a stack covers a consumer, in the reference's order
# (the order matters only for the order of coverage reasons).
PHYSICAL_ATTRIBUTES = ("sockets", "cores", "ram", "arch", "guest_limit", "storage_band")
VIRT_ATTRIBUTES = ("vcpu", "ram", "arch", "guest_limit", "storage_band")
Number = int | Fraction  # facts are whole numbers unless the fact carries decimals

# Attributes whose stacked values add up (arch and guest_limit do not).
ADDITIVE = frozenset({"sockets", "cores", "ram", "vcpu", "storage_band"})


@dataclass(frozen=True, slots=True)
class ConsumerProfile:
    uuid: str
    type_label: str
    is_guest: bool
    arch: str | None
    has_socket_fact: bool
    sockets: Number
    cores: Number
    vcpu: Number
    ram: Number
    storage_band: Number
    active_guests: int
    role: str | None
    addons: tuple[str, ...]
    service_level: str | None
    usage: str | None
    service_type: str | None
    installed: tuple[str, ...]
    virt_uuid: str | None

    @property
    def compliance_attributes(self) -> tuple[str, ...]:
        return VIRT_ATTRIBUTES if self.is_guest else PHYSICAL_ATTRIBUTES

    def fact(self, attribute: str) -> Number:
        """The consumer's value for a sizing attribute (FactValueCalculator.getFact)."""
        if attribute == "guest_limit":
            return self.active_guests
        value: Number = getattr(self, attribute)
        return value

    def with_service_level(self, level: str | None) -> ConsumerProfile:
        return replace(self, service_level=level)

    def summary(self) -> dict[str, object]:
        return {
            "uuid": self.uuid,
            "type": self.type_label,
            "guest": self.is_guest,
            "arch": self.arch,
            "sockets": _plain(self.sockets),
            "cores": _plain(self.cores),
            "vcpu": _plain(self.vcpu),
            "ram_gb": _plain(self.ram),
            "storage_band": _plain(self.storage_band),
            "active_guests": self.active_guests,
            "role": self.role,
            "addons": list(self.addons),
            "service_level": self.service_level,
            "usage": self.usage,
            "service_type": self.service_type,
        }


def _plain(value: Number) -> int | float:
    return value if isinstance(value, int) else float(value)


def _number(value: Fraction) -> Number:
    """Whole numbers as ints (fast to compare), others as exact fractions."""
    return int(value) if value.denominator == 1 else value


def _text(value: str | None) -> str | None:
    if value is None:
        return None
    stripped = value.strip()
    return stripped or None


def consumer_profile(consumer: Consumer) -> ConsumerProfile:
    """Read ``consumer``, whose numeric facts are checked (at the edge)."""
    facts = consumer.facts

    def number(name: str) -> Fraction | None:
        # JavaScript truthiness: an absent or empty fact falls back to the default.
        raw = facts.get(name)
        if not raw:
            return None
        return Fraction(raw.strip())

    sockets = number(SOCKET_FACT)
    per_socket = number(CORES_FACT)
    socket_count = sockets if sockets is not None else Fraction(1)
    cores = (per_socket if per_socket is not None else Fraction(1)) * socket_count
    memtotal = number(RAM_FACT)
    kib = math.trunc(memtotal) if memtotal is not None else 1  # parseInt
    ram = Fraction(math.floor(Fraction(kib, 1024 * 1024) + Fraction(1, 2)))  # Math.round
    band = number(BAND_FACT)

    active = 0
    for guest in consumer.guest_ids:
        attrs = guest.attributes
        who = attrs.get("virtWhoType", attrs.get("virt_who_type"))
        if who == "libvirt" and attrs.get("active") == "1":
            active += 1

    addons = list(dict.fromkeys(t for a in consumer.addons if (t := _text(a)) is not None))

    installed = list(dict.fromkeys(consumer.installed_products))  # first occurrences, in order

    return ConsumerProfile(
        uuid=consumer.uuid,
        type_label=consumer.type,
        is_guest=says_guest(consumer),
        arch=facts.get(ARCH_FACT) or None,
        has_socket_fact=sockets is not None,
        sockets=_number(socket_count),
        cores=_number(cores),
        vcpu=_number(cores),
        ram=_number(ram),
        storage_band=_number(band) if band is not None else 1,
        active_guests=active,
        role=_text(consumer.role),
        addons=tuple(addons),
        service_level=_text(consumer.service_level),
        usage=_text(consumer.usage),
        service_type=_text(consumer.service_type),
        installed=tuple(installed),
        virt_uuid=facts.get(VIRT_UUID_FACT) or None,
    )
