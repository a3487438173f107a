"""Fields a job carries that its kind does not know: warned about, or refused.

Unknown fields are accepted, because producers such as Candlepin send whole server
objects and a newer producer may send fields this version does not know. But a
misspelled field (``best_with_disk``) silently changes the answer, so every unknown
field becomes a warning in the envelope, naming it and the closest known name
("did you mean 'best_with_disks'?"). A job with ``"strict": true`` is ``rejected``
instead (code ``unknown_field``), and so is a job that does not say ``strict`` where the
deployment sets ``APPORTION_UNKNOWN_FIELDS=reject``.

The check follows the job model's pydantic core schema (compiled by
:mod:`apportion.walk.schema`: models, TypedDicts and dataclasses; lists, maps, unions
and tagged unions such as the policy modules), so it covers every kind, a deployment's
own kinds and every nested object without a list to keep in step. Two refinements:

* models that keep extra keys on purpose (``extra="allow"``: a partition space's
  ``mount`` and friends, the hardware document that yaql reads) only warn about keys
  that look like a misspelling of a known field;
* fields of Candlepin's own objects that the engine has no use for (``href``,
  ``owner``, ``created`` …, from Candlepin's published API) are known and ignored
  quietly (:data:`CANDLEPIN_FIELDS`).

Warnings for the same field at many places (2,000 pools with one misspelling each)
are reported once, with the first path and the number of other places.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from itertools import chain, islice
from typing import Any

from apportion.contracts.envelope import WarningDetail
from apportion.errors import Problem, Rejected
from apportion.walk import DEEPEST, Frame, Group, breadth_first, depth_first, join
from apportion.walk.schema import Choice, Map, Names, Object, Ref, Seq, Tagged, compile_model

CODE = "unknown_field"
MAX_WARNINGS = 50
# How much of an unknown key, and of its path, a warning quotes.
SHOWN_KEY = 80
SHOWN_PATH = 200

# Fields of Candlepin's API objects (PoolDTO, ConsumerDTO, EntitlementDTO, GuestIdDTO,
# and the created/updated of every timestamped entity) that carry nothing an
# allocation needs. Keyed by the contract model's class name.
_TIMESTAMPS = frozenset({"created", "updated"})
CANDLEPIN_FIELDS: Mapping[str, frozenset[str]] = {
    "Pool": _TIMESTAMPS
    | frozenset(
        [
            "accountNumber",
            "activeSubscription",
            "branding",
            "calculatedAttributes",
            "contractNumber",
            "derivedProductName",
            "developmentPool",
            "exported",
            "href",
            "locked",
            "managed",
            "orderNumber",
            "owner",
            "productName",
            "restrictedToUsername",
            "shared",
            "sourceEntitlement",
            "sourceStackId",
            "stackId",
            "stacked",
            "subscriptionId",
            "subscriptionSubKey",
            "type",
            "upstreamConsumerId",
            "upstreamEntitlementId",
            "upstreamPoolId",
        ]
    ),
    "Consumer": _TIMESTAMPS
    | frozenset(
        [
            "activationKeys",
            "annotations",
            "autoheal",
            "canActivate",
            "capabilities",
            "contentAccessMode",
            "contentTags",
            "cryptographicCapabilities",
            "entitlementCount",
            "entitlementStatus",
            "environment",
            "environments",
            "href",
            "hypervisorId",
            "id",
            "idCert",
            "lastCheckin",
            "name",
            "owner",
            "registrationAuthenticationMethod",
            "releaseVer",
            "systemPurposeStatus",
            "username",
        ]
    ),
    "Entitlement": _TIMESTAMPS | {"certificates", "consumer", "href"},
    "GuestId": _TIMESTAMPS | {"id"},
}


# Pool attributes the attach engine reads (tests/unit/test_unknown_fields.py checks
# that each is still read there): a near miss such as `instance_multiplyer` is warned
# about, every other attribute a pool carries is Candlepin's business.
POOL_ATTRIBUTES = (
    "addons",
    "arch",
    "cores",
    "guest_limit",
    "instance_multiplier",
    "multi-entitlement",
    "physical_only",
    "pool_derived",
    "ram",
    "requires_consumer",
    "requires_consumer_type",
    "requires_host",
    "roles",
    "sockets",
    "stacking_id",
    "storage_band",
    "support_level",
    "support_type",
    "unmapped_guests_only",
    "usage",
    "vcpu",
    "virt_limit",
    "virt_only",
)
NAMED_MAPS: Mapping[tuple[str, str], tuple[str, ...]] = {
    (model, attributes): POOL_ATTRIBUTES
    for model in ("Pool", "_PoolReading")
    for attributes in ("attributes", "product_attributes", "derived_product_attributes")
}


# ---- the shape of a job, compiled from its core schema -------------------------------


@cache
def _shape(model: Any) -> Any:
    return compile_model(model, named=NAMED_MAPS, ignored=CANDLEPIN_FIELDS)


# ---- the walk -----------------------------------------------------------------------


@dataclass
class _Found:
    path: str
    key: str
    suggestion: str | None
    what: str = "field"
    more: int = 0


# An object that keeps extra keys on purpose (a partition job's hardware) may hold any
# number of them: near-misses are looked for among its first extra keys only, in the
# job's order, so that a job with a hundred thousand hardware keys costs no more than
# one with a thousand.
OPEN_KEYS_EXAMINED = 1_000


def _suggest(key: str, candidates: tuple[str, ...], cutoff: float = 0.75) -> str | None:
    """The known name ``key`` most likely misspells, if any."""
    # A key far longer than every name cannot be a misspelling of one; it is also kept
    # out of the cache, which would otherwise hold producers' long keys.
    if len(key) > max(map(len, candidates), default=0) * 2 + 4:
        return None
    return _suggest_short(key, candidates, cutoff)


@lru_cache(maxsize=4096)
def _suggest_short(key: str, candidates: tuple[str, ...], cutoff: float) -> str | None:
    close = difflib.get_close_matches(key, candidates, n=1, cutoff=cutoff)
    if close:
        return close[0]
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()  # camelCase of a snake name
    if snake != key and snake in candidates:
        return snake
    if len(key) >= 4:  # a name cut short: `step` for `step_size`
        return next((c for c in candidates if c.startswith(key)), None)
    return None


_Found_at = dict[tuple[str, str], _Found]


def _walk(payload: Any, shape: Any, found: _Found_at) -> None:
    """Every place of ``payload`` with a field to warn about, into ``found``: depth
    first, in document order (so "the first place" of a repeated field is)."""

    def visit(value: Any, at: tuple[Any, str], path: str, depth: int, stack: list[Frame]) -> None:
        node, pattern = at
        if isinstance(node, Ref):
            node = node.resolve()
        if node is not None:
            pushed = _VISITS[type(node)](value, node, path, pattern, found)
            stack.extend((v, (n, p), where, depth + 1) for v, n, where, p in reversed(pushed))

    depth_first(payload, (shape, "$"), visit)


# (value, its place in the schema, its path, its path pattern), in document order.
_Next = list[tuple[Any, Any, str, str]]


def _visit_object(value: Any, node: Object, path: str, pattern: str, found: _Found_at) -> _Next:
    if type(value) is not dict:
        return []
    if not value.keys() <= node.known:
        _unknown(value, node, path, pattern, found)
    return [
        (value[key], child, join(path, key), join(pattern, key))
        for key, child in node.nested
        if key in value
    ]


def _visit_seq(value: Any, node: Seq, path: str, pattern: str, _: _Found_at) -> _Next:
    if type(value) is not list:
        return []
    each = f"{pattern}[*]"
    return [(item, node.item, f"{path}[{i}]", each) for i, item in enumerate(value)]


def _visit_map(value: Any, node: Map, path: str, pattern: str, _: _Found_at) -> _Next:
    if type(value) is not dict:
        return []
    each = join(pattern, "*")
    return [(v, node.value, join(path, str(k)), each) for k, v in value.items()]


def _visit_names(value: Any, node: Names, path: str, pattern: str, found: _Found_at) -> _Next:
    _near_misses(value, node, path, pattern, found)
    return []


def _visit_tagged(value: Any, node: Tagged, path: str, pattern: str, _: _Found_at) -> _Next:
    if type(value) is not dict:
        return []
    return [(value, node.options.get(str(value.get(node.key))), path, pattern)]


def _visit_choice(value: Any, node: Choice, path: str, pattern: str, _: _Found_at) -> _Next:
    return [(value, _pick(value, node.options), path, pattern)]


_VISITS: dict[type, Callable[..., _Next]] = {
    Object: _visit_object,
    Seq: _visit_seq,
    Map: _visit_map,
    Names: _visit_names,
    Tagged: _visit_tagged,
    Choice: _visit_choice,
}


def _unknown(
    value: dict[str, Any], node: Object, path: str, pattern: str, found: _Found_at
) -> None:
    unknown = value.keys() - node.known - node.ignored
    if node.open and len(unknown) > OPEN_KEYS_EXAMINED:
        unknown = set(islice((k for k in value if k in unknown), OPEN_KEYS_EXAMINED))
    for key in sorted(unknown, key=str):
        where = (pattern, key)
        if where in found:
            found[where].more += 1
            continue
        suggestion = _suggest(str(key), node.candidates)
        if node.open and suggestion is None:
            continue  # an extra key this model keeps on purpose
        found[where] = _Found(join(path, str(key)), str(key), suggestion)


def _near_misses(value: Any, node: Names, path: str, pattern: str, found: _Found_at) -> None:
    if type(value) is dict:
        named = [(key, join(path, str(key))) for key in value]
    elif type(value) is list:
        named = [
            (item.get("name"), f"{path}[{i}].name")
            for i, item in enumerate(value)
            if type(item) is dict
        ]
    else:
        return
    for key, where in named:
        if not isinstance(key, str) or key in node.known_set:
            continue
        suggestion = _suggest(key, node.known, cutoff=0.85)
        if suggestion is None:
            continue  # another attribute, one this kind does not read
        at = (pattern, key)
        if at in found:
            found[at].more += 1
        else:
            found[at] = _Found(where, key, suggestion, what="attribute")


def _pick(value: Any, options: tuple[Any, ...]) -> Any:
    """The union member a value was most likely meant for (the most keys in common)."""
    resolved = [o.resolve() if isinstance(o, Ref) else o for o in options]
    if type(value) is list:
        return next((o for o in resolved if isinstance(o, Seq)), None)
    if type(value) is not dict:
        return None
    tagged = [o for o in resolved if isinstance(o, Tagged)]
    objects = [o for o in resolved if isinstance(o, Object)]
    if tagged:
        return tagged[0]
    if not objects:
        return next((o for o in resolved if isinstance(o, Map)), None)
    return max(objects, key=lambda o: len(value.keys() & o.known))


# ---- the quick pass: every value at one place of the schema at once ------------------


def _clean(payload: Any, shape: Any) -> bool:
    """Whether no value of ``payload`` has a field to warn about. The values at one
    place of the schema are looked at together (set unions over all of them, in C)
    instead of one by one with paths: a job of 2,000 pools costs a few hundred
    microseconds, not milliseconds. The walk with paths runs only when this finds
    something."""
    return breadth_first([(shape, [payload])], _clean_step, DEEPEST) is True


def _clean_step(node: Any, values: list[Any], inner: list[Group]) -> bool:
    """Values ``values``, all at place ``node`` of the schema: False when one has a field
    to warn about; the values one level in, grouped by their place, go into ``inner``."""
    if isinstance(node, Ref):
        node = node.resolve()
    if node is None or not values:
        return True
    step: Callable[[Any, list[Any], list[Group]], bool] = _STEPS[type(node)]
    return step(node, values, inner)


def _clean_object(node: Object, values: list[Any], inner: list[Group]) -> bool:
    dicts = [v for v in values if type(v) is dict]
    keys: set[Any] = set().union(*dicts)
    unknown = keys - node.known - node.ignored
    if unknown and (not node.open or _near_miss(dicts, unknown, node.candidates)):
        return False
    inner.extend(
        (child, [d[key] for d in dicts if key in d]) for key, child in node.nested if key in keys
    )
    return True


def _clean_seq(node: Seq, values: list[Any], inner: list[Group]) -> bool:
    inner.append((node.item, list(chain.from_iterable(v for v in values if type(v) is list))))
    return True


def _clean_map(node: Map, values: list[Any], inner: list[Group]) -> bool:
    nested = chain.from_iterable(v.values() for v in values if type(v) is dict)
    inner.append((node.value, list(nested)))
    return True


def _clean_names(node: Names, values: list[Any], _: list[Group]) -> bool:
    named = [v for v in values if type(v) is dict]
    keys: set[Any] = set().union(*named)
    if len(named) < len(values):  # Candlepin's lists of {"name", "value"} items
        # Only string names can be near misses; a dict or list name is not hashable.
        keys.update(
            name
            for v in values
            if type(v) is list
            for item in v
            if type(item) is dict and type(name := item.get("name")) is str
        )
    return not any(
        _suggest(k, node.known, 0.85) for k in keys - node.known_set if isinstance(k, str)
    )


def _clean_choice(node: Tagged | Choice, values: list[Any], inner: list[Group]) -> bool:
    """The values grouped by the member of the union each belongs to, each group then
    looked at as at that member's place."""
    groups: dict[int, tuple[Any, list[Any]]] = {}
    for value in values:
        if isinstance(node, Tagged):
            member = node.options.get(str(value.get(node.key))) if type(value) is dict else None
        else:
            member = _pick(value, node.options)
        if member is not None:
            groups.setdefault(id(member), (member, []))[1].append(value)
    return all(_clean_step(member, group, inner) for member, group in groups.values())


_STEPS: dict[type, Callable[..., bool]] = {
    Object: _clean_object,
    Seq: _clean_seq,
    Map: _clean_map,
    Names: _clean_names,
    Tagged: _clean_choice,
    Choice: _clean_choice,
}


def _near_miss(dicts: list[dict[Any, Any]], unknown: set[Any], names: tuple[str, ...]) -> bool:
    """Whether an extra key of an open object looks like a misspelt name: among the first
    OPEN_KEYS_EXAMINED extra keys, in the job's order."""
    extra = (k for d in dicts for k in d if k in unknown)
    return any(_suggest(str(k), names) for k in islice(extra, OPEN_KEYS_EXAMINED))


def find(model: Any, payload: Any) -> tuple[WarningDetail, ...]:
    """Warnings for every unknown field of ``payload`` (a job of ``model``), at most
    :data:`MAX_WARNINGS`, the same field at many places once."""
    if type(payload) is not dict:
        return ()
    shape = _shape(model)
    if _clean(payload, shape):
        return ()
    found: _Found_at = {}
    _walk(payload, shape, found)
    notices = [_notice(f) for f in found.values()]
    if len(notices) > MAX_WARNINGS:
        rest = len(notices) - MAX_WARNINGS + 1
        notices = notices[: MAX_WARNINGS - 1]
        notices.append(WarningDetail("$", CODE, f"{rest} more unknown fields not listed"))
    return tuple(notices)


def _notice(found: _Found) -> WarningDetail:
    hint = f"; did you mean {found.suggestion!r}?" if found.suggestion else ""
    more = ""
    if found.more:
        more = f" (also at {found.more} other place{'s' if found.more > 1 else ''})"
    message = f"unknown {found.what} {_short(found.key)!r} ignored{hint}{more}"
    return WarningDetail(_short(found.path, SHOWN_PATH), CODE, message)


def passed_through(model: Any, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The extra keys of an open ``model`` (``extra="allow"``) an engine may pass through
    to its result: all but those that look like a misspelling of one of its fields.

    ``min_szie`` in a partition space is a warning (or the job's rejection), never an
    attribute of the space in the answer: a caller reading the result back would take
    a typo for data.
    """
    if not extra:
        return {}
    shape = _shape(model)
    if not isinstance(shape, Object):
        return dict(extra)
    return {
        key: value
        for key, value in extra.items()
        if key in shape.ignored or _suggest(str(key), shape.candidates) is None
    }


def _short(text: str, limit: int = SHOWN_KEY) -> str:
    """Keys are the producer's: a 64 KiB one must not make every warning 64 KiB."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def rejection(notices: Sequence[WarningDetail], *, by_default: bool = False) -> Rejected:
    """The answer to a ``strict`` job with unknown fields; ``by_default``: the job did
    not say, the deployment rejects unknown fields (APPORTION_UNKNOWN_FIELDS=reject)."""
    problems = [Problem(n.path, n.message.replace(" ignored", "", 1)) for n in notices]
    first = problems[0]
    others = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    why = (
        "this deployment rejects jobs with unknown fields (a job may set strict: false "
        "to be warned instead)"
        if by_default
        else "a strict job may not have unknown fields"
    )
    return Rejected(
        f"{first.path}: {first.message}{others}; {why}",
        problems,
        code=CODE,
    )


__all__ = ["CANDLEPIN_FIELDS", "CODE", "MAX_WARNINGS", "find", "passed_through", "rejection"]
