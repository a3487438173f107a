"""A small bounded memo of ``expression`` module results, for callers that re-run one
policy many times over the same accounts (the policy studio: every slider move).

The engine stays the source of every number: the memo holds what the expression
module's own evaluation returned (the factor list, before any check) and is consulted
only under a key that provably determines that result — the expression, the limits,
and every account's values at exactly the paths the expression can read
(``apportion.yaql_eval.data_paths``). An expression whose reads cannot be proven (a
bare ``$``, a ``let`` binding, a function outside the proven set) is never memoised,
and neither is a failure (a timeout depends on the machine's load). Jobs in the worker
run without a memo.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any


class ExpressionMemo:
    """Least recently used first out, at most ``size`` results; safe across threads."""

    def __init__(self, size: int = 32) -> None:
        if size < 1:
            raise ValueError("a memo holds at least one result")
        self.size = size
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
