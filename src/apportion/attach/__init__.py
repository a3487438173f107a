"""Auto-attach and guest-to-host attach with Candlepin's semantics (docs/attach.md).

Modules, in the order the algorithm uses them:

* :mod:`.values` — reading attribute and fact values (and rejecting malformed sizes);
* :mod:`.facts` — the consumer: sizes from facts, guest status, syspurpose;
* :mod:`.pools` — attribute lookup, pool validation and pre-entitlement filters;
* :mod:`.compliance` — coverage of a consumer by stacks, the compliance status;
* :mod:`.priority` — pool priority in the three rule profiles (and where they differ);
* :mod:`.needs` — what the consumer still needs, and what counts as satisfied;
* :mod:`.offers` — which pools the rules are given, and what each offers;
* :mod:`.groups` — entitlement groups: validate, remove extra attributes, prune, quantity;
* :mod:`.select` — best groups, with rules.js's tie-breaks and skipping rules
  (:mod:`.select_indexed` follows the same scan for very large selections);
* :mod:`.explain` — the explanation for support engineers;
* :mod:`.inputs` — limits and field checks of a job;
* :mod:`.autoattach` / :mod:`.guest` — the two job kinds;
* :mod:`.heal` — heal_org: auto_attach for every consumer of an organisation in turn.

Pure: no I/O, no clock (the check time is the job's ``at`` or ``ctx.now``).
"""

from __future__ import annotations

from apportion.attach.autoattach import solve_auto_attach
from apportion.attach.guest import solve_guest_host_attach
from apportion.attach.heal import solve_heal_org

__all__ = ["solve_auto_attach", "solve_guest_host_attach", "solve_heal_org"]
