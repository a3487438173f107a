"""A pool reads as a plain field-by-field reading would read it.

The contract's readers leave fields already in the plain form (attributes ``{name:
str}``, product ids as strings) as they are after one look and rewrite the others
(Candlepin's attribute lists, numbers and booleans as attribute values, product objects)
a whole field at a time. The reference below reads the same fields the simple way, one
value (one product reference) at a time: both must accept the same inputs, produce the
same values and report the same errors at the same paths.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, ValidationError

from apportion.contracts.attach import (
    Attributes,
    AutoAttachJob,
    Pool,
    ProductId,
)
from apportion.contracts.base import WireModel, alias


class _FieldByField(WireModel):
    """The reference reading: one value, one product reference at a time."""

    id: str = Field(min_length=1, max_length=256)
    product_id: str = Field(validation_alias=alias("product_id", "productId"), min_length=1)
    quantity: int
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
        default=None,
        validation_alias=alias("derived_product_id", "derivedProductId"),
        min_length=1,
    )
    derived_product_attributes: Attributes = Field(
        default_factory=dict,
        validation_alias=alias("derived_product_attributes", "derivedProductAttributes"),
    )
    derived_provided_products: list[ProductId] = Field(
        default_factory=list,
        validation_alias=alias("derived_provided_products", "derivedProvidedProducts"),
    )


_value = st.one_of(
    st.sampled_from(["2", "0", "yes", "x86_64", "", " 4 "]),
    st.none(),
    st.integers(-2, 40),
    st.booleans(),
    st.floats(0, 8, allow_nan=False),
    st.just(["not", "scalar"]),
)
_names = st.sampled_from(["sockets", "arch", "stacking_id", "multi-entitlement", "roles"])
_attribute_dict = st.dictionaries(_names, _value, max_size=4)
_attributes = st.one_of(
    _attribute_dict,
    _attribute_dict.map(lambda d: [{"name": k, "value": v} for k, v in d.items()]),
    st.just([{"value": "no name"}]),
    st.just([{"name": None, "value": "2"}, {"name": "arch"}]),
    st.just([{"name": "sockets", "value": "2"}, {"name": "sockets", "value": 4}]),
    st.just("not attributes"),
    st.none(),
)
_product = st.one_of(
    st.sampled_from(["p1", "p2", "", "x" * 257]),
    st.sampled_from(["p1", "p2"]).map(lambda p: {"productId": p, "productName": "n"}),
    st.just({"id": "p3"}),
    st.just({"name": "no id"}),
    st.integers(0, 3),
)
_products = st.one_of(st.lists(_product, max_size=3), st.just("p1"), st.none())
_pool = st.fixed_dictionaries(
    {"id": st.sampled_from(["pool-1", ""]), "quantity": st.sampled_from([5, -1, "x"])},
    optional={
        "product_id": st.just("sku"),
        "productId": st.just("SKU"),
        "consumed": st.sampled_from([0, 2, -1]),
        "start_date": st.sampled_from(["2025-01-01T00:00:00Z", "not a date", None]),
        "endDate": st.just("2030-01-01T00:00:00.000+0000"),
        "attributes": _attributes,
        "product_attributes": _attributes,
        "productAttributes": _attributes,
        "derived_product_id": st.sampled_from(["d", "", None]),
        "derived_product_attributes": _attributes,
        "provided_products": _products,
        "providedProducts": _products,
        "derivedProvidedProducts": _products,
    },
)


def _read(model: type[BaseModel], data: dict[str, Any]) -> Any:
    try:
        return ("ok", model.model_validate(data).model_dump())
    except ValidationError as exc:
        return ("error", json.loads(exc.json(include_url=False)))


@settings(max_examples=300, deadline=None)
@given(data=_pool)
def test_every_pool_reads_as_the_per_field_reading_reads_it(data: dict[str, Any]) -> None:
    assert _read(Pool, data) == _read(_FieldByField, data)


def test_candlepins_form_and_the_plain_form_give_the_same_pool() -> None:
    plain = {
        "id": "p",
        "product_id": "RH00009",
        "quantity": 10,
        "attributes": {"multi-entitlement": "yes"},
        "product_attributes": {"sockets": "2", "virt_only": "true"},
        "provided_products": ["69"],
    }
    candlepin = {
        "id": "p",
        "productId": "RH00009",
        "quantity": 10,
        "attributes": [{"name": "multi-entitlement", "value": "yes"}],
        "productAttributes": [
            {"name": "sockets", "value": 2},
            {"name": "virt_only", "value": True},
        ],
        "providedProducts": [{"productId": "69", "productName": "RHEL"}],
    }
    assert Pool.model_validate(candlepin) == Pool.model_validate(plain)


def test_a_bad_product_reference_is_reported_at_its_own_path() -> None:
    payload = {
        "consumer": {"uuid": "c"},
        "pools": [{"id": "p", "product_id": "x", "quantity": 1, "provided_products": ["a", {}]}],
    }
    with pytest.raises(ValidationError) as caught:
        AutoAttachJob.model_validate(payload)
    [error] = caught.value.errors()
    assert error["loc"] == ("pools", 0, "provided_products", 1)
    assert error["msg"] == "Value error, product reference needs productId or id"
