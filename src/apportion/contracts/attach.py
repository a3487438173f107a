"""auto_attach and guest_host_attach jobs and results.

Both Candlepin's own JSON (camelCase keys, attributes as lists of
``{"name", "value"}``, products as ``{"productId", …}`` objects) and the
snake_case form are accepted; the models normalise to snake_case, attributes to
``dict[str, str]`` and product references to plain ids.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError
from typing_extensions import TypedDict

from apportion.contracts.base import JobBase, WireModel, alias

Rules = Literal["seed", "candlepin-5.42", "candlepin-5.44"]


def _attr_value(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise ValueError("attribute values must be strings, numbers or booleans")


def _attributes(value: Any) -> Any:
    """Candlepin sends ``[{"name": n, "value": v}]``; we also take ``{n: v}``."""
    if value is None:
        return {}
    if isinstance(value, dict) and all(type(v) is str for v in value.values()):
        return value  # the common case, already in shape
    if isinstance(value, list):
        value = _attribute_list(value)
    if isinstance(value, dict):
        return {str(k): _attr_value(v) for k, v in value.items()}
    return value


def _problem(i: int, raw: Any, message: str) -> InitErrorDetails:
    # No context given, so the message is used as it is (braces in a name stay).
    return InitErrorDetails(
        type=PydanticCustomError("attribute_name", message), loc=(i, "name"), input=raw
    )


def _attribute_list(items: list[Any]) -> dict[str, Any]:
    """Candlepin's list form read as its server reads it: a name is required (null is
    refused, where ``str`` would make it ``"None"``), a missing value is null (unset),
    and a name twice is refused at the second, as the map form refuses a key twice."""
    out: dict[str, Any] = {}
    first: dict[str, int] = {}
    problems: list[InitErrorDetails] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "name" not in item:
            raise ValueError(f"item {i}: expected {{'name': …, 'value': …}}")
        raw = item["name"]
        if raw is None or isinstance(raw, dict | list):
            got = "null" if raw is None else type(raw).__name__
            problems.append(_problem(i, raw, f"an attribute needs a name (a string), got {got}"))
            continue
        name = str(raw)
        seen = first.setdefault(name, i)
        if seen != i:
            message = f"duplicate attribute name {name!r} (also item {seen}): send it once"
            problems.append(_problem(i, raw, message))
            continue
        out[name] = item.get("value")
    if problems:
        raise ValidationError.from_exception_data("attributes", problems)
    return out


def _product_ref(value: Any) -> Any:
    """A product reference is an id, or Candlepin's ``{"productId": …}`` object."""
    if isinstance(value, dict):
        for key in ("productId", "product_id", "id"):
            if key in value:
                return value[key]
        raise ValueError("product reference needs productId or id")
    return value


Attributes = Annotated[dict[str, str | None], BeforeValidator(_attributes)]
_PRODUCT_ID_MAX = 256
# The length bounds come before the reader so that they bound the string (pydantic's
# "String should have at least 1 character"), not a sequence ("at least 1 item").
ProductId = Annotated[
    str, Field(min_length=1, max_length=_PRODUCT_ID_MAX), BeforeValidator(_product_ref)
]


def _facts(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _attr_value(v) for k, v in value.items()}
    return value


def _addons(value: Any) -> Any:
    # Candlepin stores addons as a set; a comma list in one string is common in facts.
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class GuestId(WireModel):
    guest_id: str = Field(validation_alias=alias("guest_id", "guestId"), min_length=1)
    attributes: Attributes = Field(default_factory=dict)


def _guest_id(value: Any) -> Any:
    return {"guest_id": value} if isinstance(value, str) else value


def _consumer_type(value: Any) -> Any:
    # Candlepin sends the type as {"label": "system", …}.
    if isinstance(value, dict) and "label" in value:
        return value["label"]
    return value


class Consumer(WireModel):
    uuid: str = Field(min_length=1, max_length=256)
    type: Annotated[str, BeforeValidator(_consumer_type)] = "system"
    facts: Annotated[dict[str, str | None], BeforeValidator(_facts)] = Field(default_factory=dict)
    installed_products: list[ProductId] = Field(
        default_factory=list, validation_alias=alias("installed_products", "installedProducts")
    )
    role: str | None = None
    addons: Annotated[list[str], BeforeValidator(_addons)] = Field(
        default_factory=list, validation_alias=alias("addons", "addOns")
    )
    service_level: str | None = Field(
        default=None, validation_alias=alias("service_level", "serviceLevel")
    )
    usage: str | None = None
    service_type: str | None = Field(
        default=None, validation_alias=alias("service_type", "serviceType")
    )
    guest_ids: list[Annotated[GuestId, BeforeValidator(_guest_id)]] = Field(
        default_factory=list, validation_alias=alias("guest_ids", "guestIds")
    )


def _pool_attributes(value: Any) -> Any:
    """:func:`_attributes`, after one look at the plain form (thousands of pools a job)."""
    if type(value) is dict:
        for item in value.values():
            if type(item) is not str:
                return _attributes(value)
        return value
    return _attributes(value)


def _product_refs(value: Any) -> Any:
    """A list of product references as ids. A list of valid ids is left as it is after
    one look; any other list is read item by item, with the values and the errors
    (types, messages, paths) a per-item reading (:data:`ProductId`) gives."""
    if type(value) is not list:
        return value
    for item in value:
        if type(item) is not str or not 0 < len(item) <= _PRODUCT_ID_MAX:
            break
    else:
        return value
    out: list[Any] = []
    problems: list[InitErrorDetails] = []
    for i, item in enumerate(value):
        try:
            out.append(_product_ref(item))
        except ValueError as exc:
            problems.append(
                InitErrorDetails(type="value_error", loc=(i,), input=item, ctx={"error": exc})
            )
            continue
        problems += _product_id_problems(i, out[-1])
    if problems:
        raise ValidationError.from_exception_data("product references", problems)
    return out


def _product_id_problems(i: int, item: Any) -> list[InitErrorDetails]:
    if type(item) is not str:
        return [InitErrorDetails(type="string_type", loc=(i,), input=item)]
    size = len(item)
    if 0 < size <= _PRODUCT_ID_MAX:
        return []
    if size:
        return [
            InitErrorDetails(
                type="string_too_long", loc=(i,), input=item, ctx={"max_length": _PRODUCT_ID_MAX}
            )
        ]
    return [InitErrorDetails(type="string_too_short", loc=(i,), input=item, ctx={"min_length": 1})]


PoolAttributes = Annotated[dict[str, str | None], BeforeValidator(_pool_attributes)]
ProductIds = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=_PRODUCT_ID_MAX)]],
    BeforeValidator(_product_refs),
]


# Thousands of pools arrive per job: the readers above leave a field in the plain form
# (attributes dict[str, str], product references ids) as it is after one look, so
# pydantic's own validation does the rest. (No docstring: it would change the published
# schema.)
class Pool(WireModel):
    id: str = Field(min_length=1, max_length=256)
    product_id: str = Field(validation_alias=alias("product_id", "productId"), min_length=1)
    quantity: int = Field(description="-1 = unlimited")
    consumed: int = Field(default=0, ge=0)
    start_date: datetime | None = Field(
        default=None, validation_alias=alias("start_date", "startDate")
    )
    end_date: datetime | None = Field(default=None, validation_alias=alias("end_date", "endDate"))
    attributes: PoolAttributes = Field(default_factory=dict)
    product_attributes: PoolAttributes = Field(
        default_factory=dict, validation_alias=alias("product_attributes", "productAttributes")
    )
    provided_products: ProductIds = Field(
        default_factory=list, validation_alias=alias("provided_products", "providedProducts")
    )
    # Bounded as product_id is: the derived pool a host creates for its guest takes it
    # as its product_id.
    derived_product_id: str | None = Field(
        default=None,
        validation_alias=alias("derived_product_id", "derivedProductId"),
        min_length=1,
    )
    derived_product_attributes: PoolAttributes = Field(
        default_factory=dict,
        validation_alias=alias("derived_product_attributes", "derivedProductAttributes"),
    )
    derived_provided_products: ProductIds = Field(
        default_factory=list,
        validation_alias=alias("derived_provided_products", "derivedProvidedProducts"),
    )


class Entitlement(WireModel):
    id: str = Field(min_length=1, max_length=256)
    pool: Pool
    quantity: int = Field(ge=1)
    # Extension: Candlepin entitlements carry their own dates; when absent the pool's apply.
    start_date: datetime | None = Field(
        default=None, validation_alias=alias("start_date", "startDate")
    )
    end_date: datetime | None = Field(default=None, validation_alias=alias("end_date", "endDate"))


class Compliance(WireModel):
    compliant_products: dict[str, list[Entitlement]] = Field(
        default_factory=dict, validation_alias=alias("compliant_products", "compliantProducts")
    )
    partially_compliant_products: dict[str, list[Entitlement]] = Field(
        default_factory=dict,
        validation_alias=alias("partially_compliant_products", "partiallyCompliantProducts"),
    )
    partial_stacks: dict[str, list[Entitlement]] = Field(
        default_factory=dict, validation_alias=alias("partial_stacks", "partialStacks")
    )


class AutoAttachJob(JobBase):
    consumer: Consumer
    products: list[ProductId] | None = None
    pools: list[Pool] = Field(default_factory=list)
    entitlements: list[Entitlement] = Field(default_factory=list)
    compliance: Compliance | None = None
    at: datetime | None = None
    rules: Rules = "seed"
    # Extension: the uuid of a guest consumer's host when it is known (virt-who mapping).
    # requires_host pools need it; unmapped_guests_only pools are for guests without one.
    host_uuid: str | None = Field(
        default=None, validation_alias=alias("host_uuid", "hostUuid"), min_length=1, max_length=256
    )


class GuestHostAttachJob(JobBase):
    guest: Consumer
    host: Consumer
    pools: list[Pool] = Field(default_factory=list)
    host_entitlements: list[Entitlement] = Field(
        default_factory=list, validation_alias=alias("host_entitlements", "hostEntitlements")
    )
    guest_entitlements: list[Entitlement] = Field(
        default_factory=list, validation_alias=alias("guest_entitlements", "guestEntitlements")
    )
    requested_pools: list[str] | None = Field(
        default=None, validation_alias=alias("requested_pools", "requestedPools")
    )
    at: datetime | None = None
    rules: Rules = "seed"


# ---- results ------------------------------------------------------------------------
# Plain data: the engines build these dicts and the envelope writes them as they are.


class AutoAttachResult(TypedDict):
    pool_quantities: dict[str, int]
    covered_products: list[str]
    uncovered_products: list[str]
    explanation: dict[str, Any]


class GuestHostAttachResult(TypedDict):
    host_pool_quantities: dict[str, int]
    derived_pools: list[Pool]
    guest_pool_quantities: dict[str, int]
    explanation: dict[str, Any]
