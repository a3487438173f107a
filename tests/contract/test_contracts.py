"""The wire contract: shapes producers and subscribers rely on (docs/contract.md)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from apportion import kinds
from apportion.contracts import Envelope
from apportion.contracts.attach import AutoAttachJob, Pool
from apportion.contracts.events import LaunchOutcomeJob
from apportion.contracts.launch import LaunchSelectJob
from apportion.contracts.partition import PartitionJob
from apportion.schemas import job_schema, result_schema
from tests.conftest import load_example


@pytest.mark.parametrize("kind", kinds.names())
def test_every_kind_exports_a_json_schema_for_its_job_and_its_envelope(kind: str) -> None:
    job = job_schema(kind)
    envelope = result_schema(kind)

    assert job["type"] == "object"
    assert "job_id" in job["properties"]
    assert envelope["properties"]["status"]["enum"] == ["ok", "infeasible", "rejected"]
    assert {"job_id", "kind", "status", "result", "error", "engine_version", "elapsed_ms"} <= set(
        envelope["properties"]
    )
    json.dumps(job)
    json.dumps(envelope)


@pytest.mark.parametrize(
    ("kind", "example"),
    [
        ("auto_attach", "auto_attach.json"),
        ("guest_host_attach", "guest_host_attach.json"),
        ("launch_select", "launch_select.candidates.json"),
        ("launch_select", "launch_select.json"),
        ("partition", "partition.json"),
        ("launch_outcome", "launch_outcome.json"),
    ],
)
def test_every_shared_example_job_validates_against_its_contract(kind: str, example: str) -> None:
    job = kinds.get(kind).job.model_validate(load_example(example))

    assert job.job_id is not None


def test_the_partition_schema_keeps_its_wire_name_and_accepts_partitions_plural() -> None:
    job = PartitionJob.model_validate(
        {
            "schema": [{"id": "p", "type": "partitions", "size": 10}],
            "hardware": {"disks": [{"id": "sda", "size": 100}]},
        }
    )

    assert job.spaces[0].type == "partition"
    assert "schema" in job.model_dump(by_alias=True)


def test_a_pool_in_candlepin_json_is_read_as_snake_case() -> None:
    pool = Pool.model_validate(
        {
            "id": "p1",
            "productId": "RH00001",
            "quantity": 10,
            "consumed": 2,
            "startDate": "2026-01-01T00:00:00.000+0000",
            "endDate": "2027-01-01T00:00:00Z",
            "attributes": [{"name": "virt_only", "value": "true"}],
            "productAttributes": [{"name": "sockets", "value": "2"}],
            "providedProducts": [{"productId": "69", "productName": "RHEL"}],
            "derivedProductId": "RH00049",
            "derivedProvidedProducts": [{"productId": "70"}],
            "owner": {"key": "admin"},
        }
    )

    assert pool.product_id == "RH00001"
    assert pool.attributes == {"virt_only": "true"}
    assert pool.product_attributes == {"sockets": "2"}
    assert pool.provided_products == ["69"]
    assert pool.derived_provided_products == ["70"]
    assert pool.start_date is not None
    assert pool.start_date.year == 2026


def test_consumer_type_given_as_a_candlepin_label_object_is_accepted() -> None:
    job = AutoAttachJob.model_validate(
        {
            "consumer": {
                "uuid": "c",
                "type": {"label": "hypervisor"},
                "installedProducts": [{"productId": "69"}],
                "addOns": "a, b",
            }
        }
    )

    assert job.consumer.type == "hypervisor"
    assert job.consumer.installed_products == ["69"]
    assert job.consumer.addons == ["a", "b"]


def test_nan_and_infinity_are_not_numbers_a_job_may_carry() -> None:
    with pytest.raises(ValidationError) as info:
        PartitionJob.model_validate(
            {
                "schema": [{"id": "p", "type": "partition", "size": float("nan")}],
                "hardware": {"disks": [{"id": "sda", "size": float("inf")}]},
            }
        )

    locs = {e["loc"] for e in info.value.errors()}
    assert ("hardware", "disks", 0, "size") in locs


def test_a_launch_select_job_distinguishes_omitted_policy_from_null_policy() -> None:
    omitted = LaunchSelectJob.model_validate({"providers": [], "request": "resources=VCPU:1"})
    null = LaunchSelectJob.model_validate(
        {"providers": [], "request": "resources=VCPU:1", "policy": None}
    )

    assert not omitted.policy_given
    assert null.policy_given
    assert null.policy is None


def test_an_unknown_policy_module_is_refused() -> None:
    with pytest.raises(ValidationError):
        LaunchSelectJob.model_validate(
            {"providers": [], "request": "resources=VCPU:1", "policy": [{"module": "astrology"}]}
        )


def test_a_launch_outcome_must_say_failed_or_succeeded() -> None:
    with pytest.raises(ValidationError):
        LaunchOutcomeJob.model_validate(
            {"event_id": "e", "account": "a", "outcome": "exploded", "at": "2026-11-21T00:00:00Z"}
        )


def test_an_envelope_serialises_to_exactly_the_documented_keys_in_order() -> None:
    env = Envelope(
        job_id="j", kind="partition", status="ok", result={}, engine_version="0.1.0", elapsed_ms=1.5
    )

    assert list(env.as_dict()) == [
        "job_id",
        "kind",
        "status",
        "result",
        "error",
        "engine_version",
        "elapsed_ms",
    ]
