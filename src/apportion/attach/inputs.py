"""What one run of the rules reads: an attach job, checked at the edge, made into views.

auto_attach builds one :class:`AttachInput`; guest_host_attach two (the host's, reading
derived products, then the guest's); heal_org one per consumer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from apportion.attach.columns import PoolColumns
from apportion.attach.compliance import AttachedEntitlement, ComplianceView
from apportion.attach.facts import ConsumerProfile
from apportion.attach.pools import PoolView
from apportion.attach.priority import RuleProfile
from apportion.contracts.attach import Pool


@dataclass(frozen=True, slots=True)
class AttachInput:
    """An attach job as the rules read it: its consumer, compliance and entitlements made
    into views, and its pools (read lazily when given as the job's ``Pool``)."""

    consumer: ConsumerProfile
    pools: Sequence[Pool | PoolView]
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
