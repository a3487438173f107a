"""Policies as YAML text: what ``apportion policy show`` prints and ``set`` reads.

``show`` prints the module list with the version's details as YAML comments, so its
output is a file ``set`` accepts as it is. ``set`` accepts the same two forms as
``config/default_policy.yaml``: a list of modules, or a mapping with a ``policy`` list.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import yaml

from apportion.errors import Rejected


class _Loader(yaml.SafeLoader):
    """YAML without aliases: ``*ref`` repeats a node without costing text, so a short file
    could expand into a policy far over the store's size limit once written out."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not accepted in a policy", event.start_mark
            )
        return super().compose_node(parent, index)


def policy_yaml(policy: list[dict[str, Any]]) -> str:
    """The module list as block YAML, keys in the order they were saved."""
    text: str = yaml.safe_dump(
        policy, sort_keys=False, default_flow_style=False, allow_unicode=True, width=100
    )
    return text


def when(saved_at: float) -> str:
    """``saved_at`` (unix seconds) as an ISO 8601 UTC time, to the second."""
    return datetime.fromtimestamp(saved_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_policy_yaml(text: str, *, max_chars: int, source: str = "policy") -> Any:
    """The module list in ``text`` (YAML or JSON), or :class:`Rejected` saying why not.

    What it returns is only decoded: the store validates it (apportion.selection.stored).
    """
    if len(text) > max_chars:
        raise Rejected.at(
            source, f"{len(text)} characters exceed the limit of {max_chars}", code="too_large"
        )
    try:
        data = yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise Rejected.at(source, f"not YAML{where}: {problem}") from None
    except RecursionError:
        raise Rejected.at(source, "nested too deeply") from None
    if isinstance(data, dict) and set(data) == {"policy"}:
        data = data["policy"]
    if not isinstance(data, list):
        raise Rejected.at(
            source,
            "expected a list of policy modules (as config/default_policy.yaml), "
            f"got {type(data).__name__}",
        )
    return data


__all__ = ["policy_yaml", "read_policy_yaml", "when"]
