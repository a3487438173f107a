"""Auto-attach and guest-to-host attach with Candlepin's semantics (docs/attach.md).

Modules, in the order the algorithm uses them:

* :mod:`.values` — reading syspurpose value lists;
* :mod:`.facts` — the consumer: sizes from facts, guest status, syspurpose;
* :mod:`.pools` — attribute lookup, the pool's read view and pre-entitlement filters;
* :mod:`.compliance` — coverage of a consumer by stacks, the compliance status;
* :mod:`.priority` — pool priority in the three rule profiles (and where they differ);
* :mod:`.needs` — what the consumer still needs, and what counts as satisfied;
* :mod:`.offers` — which pools the rules are given, and what each offers;
* :mod:`.groups` — entitlement groups: validate, remove extra attributes, prune, quantity;
* :mod:`.select` — best groups, with rules.js's tie-breaks and skipping rules
  (:mod:`.select_indexed` follows the same scan for very large selections);
* :mod:`.explain` — the explanation for support engineers;
* :mod:`.inputs` — what one run of the rules reads (:class:`~.inputs.AttachInput`);
* :mod:`.autoattach` / :mod:`.guest` — the two job kinds;
* :mod:`.heal` — heal_org: auto_attach for every consumer of an organisation in turn.

A job reaches these engines checked: its sizes against the limits, its numbers written
as text and its fields against each other are checked once at the edge
(:mod:`apportion.contracts.attach_checks`), and nothing here checks them again.

Pure: no I/O, no clock (the check time is the job's ``at`` or ``ctx.now``).
"""

from __future__ import annotations

from apportion.attach.autoattach import solve_auto_attach
from apportion.attach.guest import solve_guest_host_attach
from apportion.attach.heal import solve_heal_org

__all__ = ["solve_auto_attach", "solve_guest_host_attach", "solve_heal_org"]
