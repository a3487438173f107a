"""The wire contract: the models of every job, result and event, and the checks that a
kind's registry entry names for what its model's types cannot express (sizes against the
limits, numbers written as text, one field against another; :mod:`.attach_checks`,
:mod:`.partition_checks`).

Producers in other services and acceptance checks depend on these shapes: change them
only by extending. Which model belongs to which job kind is the registry's business
(:mod:`apportion.kinds`); the JSON Schemas are generated from it (:mod:`apportion.schemas`).
"""

from __future__ import annotations

from apportion.contracts.base import JobBase
from apportion.contracts.envelope import Envelope, ErrorDetail, ErrorInfo, Status, WarningDetail

__all__ = ["Envelope", "ErrorDetail", "ErrorInfo", "JobBase", "Status", "WarningDetail"]
