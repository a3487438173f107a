"""auto_attach and guest_host_attach jobs and results (docs/contract.md).

Both Candlepin's own JSON (camelCase keys, attributes as lists of
``{"name", "value"}``, products as ``{"productId", …}`` objects) and the
snake_case form are accepted; the models normalise to snake_case, attributes to
``dict[str, str]`` and product references to plain ids.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

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
        out: dict[str, Any] = {}
        for i, item in enumerate(value):
            if not isinstance(item, dict) or "name" not in item:
                raise ValueError(f"item {i}: expected {{'name': …, 'value': …}}")
            out[str(item["name"])] = item.get("value")
        value = out
    if isinstance(value, dict):
        return {str(k): _attr_value(v) for k, v in value.items()}
    return value


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
ProductId = Annotated[
    str, BeforeValidator(_product_ref), Field(min_length=1, max_length=_PRODUCT_ID_MAX)
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


class _PoolReading(WireModel):
    """Every form a pool may arrive in, read field by field (Candlepin's and ours).

    :class:`Pool` only falls back to this reading when its fast check finds a field
    that is not already in the plain form (attribute lists, numbers or booleans as
    attribute values, product references as objects, anything invalid), so the values
    it accepts, the values it produces and the errors it reports are this model's.
    """

    id: str = Field(min_length=1, max_length=256)
    product_id: str = Field(validation_alias=alias("product_id", "productId"), min_length=1)
    quantity: int = Field(description="-1 = unlimited")
    consumed: int = Field(default=0, ge=0)
    start_date: datetime | None = Field(
        default=None, validation_alias=alias("start_date", "startDate")
    )
    end_date: datetime | None = Field(default=None, validation_alias=alias("end_date", "endDate"))
    attributes: Attributes = Field(default_factory=dict)
    product_attributes: Attributes = Field(
        default_factory=dict, validation_alias=alias("product_attributes", "productAttributes")
    )
    provided_products: list[ProductId] = Field(
        default_factory=list, validation_alias=alias("provided_products", "providedProducts")
    )
    derived_product_id: str | None = Field(
        default=None, validation_alias=alias("derived_product_id", "derivedProductId")
    )
    derived_product_attributes: Attributes = Field(
        default_factory=dict,
        validation_alias=alias("derived_product_attributes", "derivedProductAttributes"),
    )
    derived_provided_products: list[ProductId] = Field(
        default_factory=list,
        validation_alias=alias("derived_provided_products", "derivedProvidedProducts"),
    )


# The keys (field names and their aliases) whose values the per-field readers of
# _PoolReading convert; when each holds the plain form, nothing needs converting.
_ATTRIBUTE_KEYS = (
    "attributes",
    "product_attributes",
    "productAttributes",
    "derived_product_attributes",
    "derivedProductAttributes",
)
_PRODUCT_KEYS = (
    "provided_products",
    "providedProducts",
    "derived_provided_products",
    "derivedProvidedProducts",
)
_ABSENT = object()


def _plain_pool(data: dict[Any, Any]) -> bool:
    """Whether every convertible field of ``data`` is absent or already in the plain form:
    attributes a dict of strings, product lists lists of valid ids (1 to 256 characters;
    the per-field reading words a length error its own way, so those go there)."""
    get = data.get
    for key in _ATTRIBUTE_KEYS:
        value = get(key, _ABSENT)
        if value is _ABSENT:
            continue
        if type(value) is not dict:
            return False
        for item in value.values():
            if type(item) is not str:
                return False
    for key in _PRODUCT_KEYS:
        value = get(key, _ABSENT)
        if value is _ABSENT:
            continue
        if type(value) is not list:
            return False
        for item in value:
            if type(item) is not str or not 0 < len(item) <= _PRODUCT_ID_MAX:
                return False
    return True


# Never fails on the fast path (checked by _plain_pool); kept for the published schema.
PlainProductId = Annotated[str, Field(min_length=1, max_length=_PRODUCT_ID_MAX)]


# Thousands of pools arrive per job, so the per-field conversions (Candlepin's attribute
# lists, numbers and booleans as attribute values, product objects) are not run on every
# field: one check per pool finds the pools already in the plain form (attributes
# dict[str, str], product references plain ids), which pydantic validates natively; any
# other pool is read by _PoolReading, which gives the values and the errors (at the same
# paths) of the per-field reading. (No docstring: it would change the published schema.)
class Pool(WireModel):
    id: str = Field(min_length=1, max_length=256)
    product_id: str = Field(validation_alias=alias("product_id", "productId"), min_length=1)
    quantity: int = Field(description="-1 = unlimited")
    consumed: int = Field(default=0, ge=0)
    start_date: datetime | None = Field(
        default=None, validation_alias=alias("start_date", "startDate")
    )
    end_date: datetime | None = Field(default=None, validation_alias=alias("end_date", "endDate"))
    attributes: dict[str, str | None] = Field(default_factory=dict)
    product_attributes: dict[str, str | None] = Field(
        default_factory=dict, validation_alias=alias("product_attributes", "productAttributes")
    )
    provided_products: list[PlainProductId] = Field(
        default_factory=list, validation_alias=alias("provided_products", "providedProducts")
    )
    derived_product_id: str | None = Field(
        default=None, validation_alias=alias("derived_product_id", "derivedProductId")
    )
    derived_product_attributes: dict[str, str | None] = Field(
        default_factory=dict,
        validation_alias=alias("derived_product_attributes", "derivedProductAttributes"),
    )
    derived_provided_products: list[PlainProductId] = Field(
        default_factory=list,
        validation_alias=alias("derived_provided_products", "derivedProvidedProducts"),
    )

    @model_validator(mode="before")
    @classmethod
    def _read_other_forms(cls, data: Any) -> Any:
        if type(data) is not dict or _plain_pool(data):
            return data
        # A ValidationError raised here is reported at this pool's path, field by field.
        return dict(_PoolReading.model_validate(data))


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


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class AutoAttachResult(_Out):
    pool_quantities: dict[str, int]
    covered_products: list[str]
    uncovered_products: list[str]
    explanation: dict[str, Any]


class GuestHostAttachResult(_Out):
    host_pool_quantities: dict[str, int]
    derived_pools: list[Pool]
    guest_pool_quantities: dict[str, int]
    explanation: dict[str, Any]
