"""Parse a Placement ``GET /allocation_candidates`` query string into request groups.

Latest-microversion semantics (Placement 1.39) with the project's decisions:

* ``group_policy`` defaults to ``none`` (the seed), even with several suffixed
  groups that have resources, where Placement would answer 400.
* Resource-class and trait names are free-form (no registry) but must match
  ``[A-Z0-9_]+``; aggregates and ``in_tree`` are free-form non-empty strings
  (no UUID requirement).
* A repeated ``group_policy`` or ``limit``: the first value wins, as in
  Placement (its functional tests: "multiple limits picks the first one"); every
  value must still be well formed. A repeated ``root_required`` is rejected, as
  in Placement.
* Keys that Placement lets silently overwrite each other are rejected instead:
  a repeated ``resources$S`` or ``in_tree$S`` and a resource class named twice in
  one ``resources$S``. The last-one-wins behaviour hides typos.
* ``!!T`` is a malformed trait name here (Placement strips any number of ``!``).
* An unsuffixed group without resources is allowed (the seed: "it can be
  satisfied by any provider in the tree"); Placement rejects it.

Every error is a :class:`Rejected` at path ``request`` carrying Placement's text
where Placement has one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import unquote_plus

from apportion.errors import Problem, Rejected
from apportion.limits import Limits, env_name, over_limit
from apportion.placement.model import MAX_INTEGER, valid_name

PATH = "request"
GROUP_KEY = re.compile(r"(resources|required|member_of|in_tree)([a-zA-Z0-9_-]{1,64})?")
REQUEST_WIDE = ("group_policy", "limit", "root_required", "same_subtree")
AMOUNT = re.compile(r"-?[0-9]+")
LIMIT = re.compile(r"[1-9][0-9]*")
RESOURCES_FORM = (
    "Badly formed resources parameter. Expected resources query string parameter "
    "in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: {}."
)

GroupPolicy = Literal["none", "isolate"]


@dataclass(frozen=True, slots=True)
class RequestGroup:
    """One request group. ``suffix`` is ``""`` for the unsuffixed group."""

    suffix: str
    resources: tuple[tuple[str, int], ...] = ()
    # Each clause is an any-of set; clauses are ANDed.
    required: tuple[frozenset[str], ...] = ()
    forbidden: frozenset[str] = frozenset()
    # Each clause is an any-of set of aggregates; clauses are ANDed.
    member_of: tuple[frozenset[str], ...] = ()
    forbidden_aggregates: frozenset[str] = frozenset()
    in_tree: str | None = None

    @property
    def suffixed(self) -> bool:
        return self.suffix != ""


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    groups: tuple[RequestGroup, ...]
    group_policy: GroupPolicy = "none"
    limit: int | None = None
    root_required: frozenset[str] = frozenset()
    root_forbidden: frozenset[str] = frozenset()
    same_subtrees: tuple[frozenset[str], ...] = ()


@dataclass(slots=True)
class _Draft:
    """A group while its keys are being read (keys of one group may be spread out)."""

    suffix: str
    resources: tuple[tuple[str, int], ...] | None = None
    required: list[frozenset[str]] = field(default_factory=list)
    forbidden: set[str] = field(default_factory=set)
    member_of: list[frozenset[str]] = field(default_factory=list)
    forbidden_aggregates: set[str] = field(default_factory=set)
    in_tree: str | None = None

    def freeze(self) -> RequestGroup:
        return RequestGroup(
            suffix=self.suffix,
            resources=self.resources or (),
            required=tuple(self.required),
            forbidden=frozenset(self.forbidden),
            member_of=tuple(self.member_of),
            forbidden_aggregates=frozenset(self.forbidden_aggregates),
            in_tree=self.in_tree,
        )


def _reject(message: str) -> Rejected:
    return Rejected.at(PATH, message)


def _over(field: str, message: str) -> Rejected:
    return over_limit(field, Problem(PATH, message))


def _once(key: str) -> Rejected:
    return _reject(f"Query parameter '{key}' may be specified only once.")


def split_query(text: str) -> list[tuple[str, str]]:
    """``a=1&b=2`` → ``[("a", "1"), ("b", "2")]``, percent-decoded.

    Whitespace around each pair is ignored so that the multi-line queries of the
    Placement documentation can be pasted as they are; a leading ``?`` too.
    """
    text = text.strip()
    if text.startswith("?"):
        text = text[1:]
    pairs = []
    for part in text.split("&"):
        part = part.strip()
        if not part:
            continue
        key, _, value = part.partition("=")
        pairs.append((unquote_plus(key).strip(), unquote_plus(value).strip()))
    return pairs


def parse_resources(value: str) -> tuple[tuple[str, int], ...]:
    if value == "":
        raise _reject(RESOURCES_FORM.format("empty string"))
    out: dict[str, int] = {}
    for item in value.split(","):
        name, sep, amount_text = item.partition(":")
        name, amount_text = name.strip(), amount_text.strip()
        if not sep or ":" in amount_text or not name:
            raise _reject(RESOURCES_FORM.format(item))
        if not AMOUNT.fullmatch(amount_text):
            raise _reject(
                f"Requested resource {name} expected positive integer amount. Got: {amount_text}."
            )
        amount = int(amount_text)
        if amount < 1:
            raise _reject(f"Requested resource {name} requires amount >= 1. Got: {amount}.")
        if amount > MAX_INTEGER:
            raise _reject(
                f"Requested resource {name} requires amount <= {MAX_INTEGER}. Got: {amount}."
            )
        if not valid_name(name):
            raise _reject(
                f"Invalid resource class in resources parameter: {name!r} is not a valid "
                "resource class name (expected [A-Z0-9_]+)."
            )
        if name in out:
            raise _reject(f"Requested resource {name} is specified more than once in: {value}.")
        out[name] = amount
    return tuple(out.items())


def _check_trait(name: str, value: str, key: str) -> None:
    if not valid_name(name):
        raise _reject(
            f"Invalid query string parameters: Expected '{key}' parameter value of the form: "
            f"HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an invalid trait name {name!r} in: {value}"
        )


def parse_traits(
    value: str, *, key: str = "required", allow_any: bool = True
) -> tuple[list[frozenset[str]], set[str]]:
    """One ``required`` value → (any-of clauses, forbidden traits)."""
    if value.startswith("in:"):
        if not allow_any:
            raise _reject(
                f"Invalid query string parameters: '{key}' does not support the "
                f"'in:' prefix. Got: {value}"
            )
        names = [n.strip() for n in value[3:].split(",")]
        if not all(names):
            raise _reject(
                f"Invalid query string parameters: Expected '{key}' parameter value of the "
                f"form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: {value}"
            )
        if any(n.startswith("!") for n in names):
            raise _reject(
                "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' "
                f"does not support forbidden traits. Got: {value}"
            )
        for n in names:
            _check_trait(n, value, key)
        return [frozenset(names)], set()
    names = [n.strip() for n in value.split(",")]
    bare = [n[1:] if n.startswith("!") else n for n in names]
    if not all(bare):
        raise _reject(
            f"Invalid query string parameters: Expected '{key}' parameter value of the form: "
            f"HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait in: {value}"
        )
    required: list[frozenset[str]] = []
    forbidden: set[str] = set()
    for n, b in zip(names, bare, strict=True):
        _check_trait(b, value, key)
        if n.startswith("!"):
            forbidden.add(b)
        else:
            required.append(frozenset((b,)))
    return required, forbidden


def parse_member_of(value: str, key: str) -> tuple[frozenset[str] | None, set[str]]:
    """One ``member_of`` value → (an any-of clause or None, forbidden aggregates)."""
    if "," in value and not (value.startswith("in:") or value.startswith("!in:")):
        raise _reject(
            "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' "
            f"keyword using the valid microversion. Got: {value}"
        )
    if value.startswith("!in:"):
        names, negative = value[4:].split(","), True
    elif value.startswith("!"):
        names, negative = [value[1:]], True
    elif value.startswith("in:"):
        names, negative = value[3:].split(","), False
    else:
        names, negative = [value], False
    names = [n.strip() for n in names]
    if not all(names):
        raise _reject(
            f"Invalid query string parameters: Expected '{key}' parameter to contain "
            f"aggregate name(s). Got an empty name in: {value}"
        )
    if negative:
        return None, set(names)
    return frozenset(names), set()


def parse_request(text: str, limits: Limits) -> ParsedRequest:
    """Parse and check ``text``; raises :class:`Rejected` at path ``request``."""
    if len(text) > limits.max_request_length:
        raise _over(
            "max_request_length",
            f"request of {len(text)} characters exceeds the limit of {limits.max_request_length} "
            f"(raise {env_name('max_request_length')})",
        )
    parser = _Parser(limits.max_request_groups)
    for key, value in split_query(text):
        match = GROUP_KEY.fullmatch(key)
        if match is not None:
            parser.group_key(key, match.group(1), match.group(2) or "", value)
        elif key in REQUEST_WIDE:
            parser.request_wide(key, value)
        else:
            raise _reject(
                "Invalid query string parameters: Additional properties are not allowed "
                f"({key!r} was unexpected)"
            )
    return parser.finish()


@dataclass(slots=True)
class _Parser:
    """The request as its keys are read, in query order."""

    max_groups: int
    drafts: dict[str, _Draft] = field(default_factory=dict)
    # Every value of group_policy and limit is checked; the first one is used.
    group_policies: list[GroupPolicy] = field(default_factory=list)
    limits: list[int] = field(default_factory=list)
    root: tuple[set[str], set[str]] | None = None
    same_subtrees: list[frozenset[str]] = field(default_factory=list)

    def draft(self, suffix: str) -> _Draft:
        draft = self.drafts.get(suffix)
        if draft is None:
            if len(self.drafts) >= self.max_groups:
                raise _over(
                    "max_request_groups",
                    f"more than {self.max_groups} request groups "
                    f"(raise {env_name('max_request_groups')})",
                )
            draft = self.drafts[suffix] = _Draft(suffix)
        return draft

    def group_key(self, key: str, prefix: str, suffix: str, value: str) -> None:
        draft = self.draft(suffix)
        if prefix == "resources":
            if draft.resources is not None:
                raise _once(key)
            draft.resources = parse_resources(value)
        elif prefix == "required":
            required, forbidden = parse_traits(value, key=key)
            draft.required.extend(required)
            draft.forbidden |= forbidden
        elif prefix == "member_of":
            clause, forbidden = parse_member_of(value, key)
            if clause is not None:
                draft.member_of.append(clause)
            draft.forbidden_aggregates |= forbidden
        else:
            if draft.in_tree is not None:
                raise _once(key)
            if not value:
                raise _reject(
                    f"Invalid query string parameters: Expected '{key}' parameter to "
                    "name a provider. Got an empty value."
                )
            draft.in_tree = value

    def request_wide(self, key: str, value: str) -> None:
        if key == "group_policy":
            if value not in ("none", "isolate"):
                raise _reject(
                    f"Invalid query string parameters: {value!r} is not one of ['none', 'isolate']"
                )
            self.group_policies.append("isolate" if value == "isolate" else "none")
        elif key == "limit":
            if not LIMIT.fullmatch(value):
                raise _reject(
                    f"Invalid query string parameters: {value!r} does not match '^[1-9][0-9]*$'"
                )
            self.limits.append(int(value))
        elif key == "root_required":
            if self.root is not None:
                raise _once(key)
            self.root = _root_required(value)
        else:
            suffixes = frozenset(s.strip() for s in value.split(","))
            if "" in suffixes:
                raise _reject(
                    "Empty string (unsuffixed group) can not be specified in `same_subtree`"
                )
            self.same_subtrees.append(suffixes)

    def finish(self) -> ParsedRequest:
        groups = tuple(d.freeze() for d in self.drafts.values())
        _check_groups(groups, self.same_subtrees)
        wanted, forbidden = self.root or (set(), set())
        return ParsedRequest(
            groups=groups,
            group_policy=self.group_policies[0] if self.group_policies else "none",
            limit=self.limits[0] if self.limits else None,
            root_required=frozenset(wanted),
            root_forbidden=frozenset(forbidden),
            same_subtrees=tuple(self.same_subtrees),
        )


def _root_required(value: str) -> tuple[set[str], set[str]]:
    """One ``root_required`` value → (required traits, forbidden traits)."""
    clauses, forbidden = parse_traits(value, key="root_required", allow_any=False)
    wanted = {next(iter(c)) for c in clauses}
    conflicts = wanted & forbidden
    if conflicts:
        raise _reject(
            "Conflicting required and forbidden traits found in root_required: "
            + ", ".join(sorted(conflicts))
        )
    return wanted, forbidden


def _check_groups(groups: tuple[RequestGroup, ...], same_subtrees: list[frozenset[str]]) -> None:
    """Placement's checks, in Placement's order."""
    resourceless = [g.suffix for g in groups if not g.resources]
    if len(resourceless) == len(groups):
        raise _reject("There must be at least one resources or resources[$S] parameter.")
    in_subtree: set[str] = set().union(*same_subtrees)
    bad = [s for s in resourceless if s and s not in in_subtree]
    if bad:
        raise _reject(
            "Resourceless suffixed group request should be specified in `same_subtree` "
            f"query param: bad group(s) - {bad}."
        )
    known = [g.suffix for g in groups]
    unknown = sorted(s for s in in_subtree if s not in known)
    if unknown:
        raise _reject(
            f"Real suffixes should be specified in `same_subtree`: {unknown} not found in {known}."
        )
    conflicts = sorted(
        f"required{g.suffix}: ({', '.join(sorted(clause))})"
        for g in groups
        for clause in g.required
        if clause <= g.forbidden
    )
    if conflicts:
        raise _reject(
            "Conflicting required and forbidden traits found in the following traits keys: "
            + ", ".join(conflicts)
        )
