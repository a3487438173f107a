"""Provider → account resolution and free shares (least_used, expression)."""

from __future__ import annotations

import pytest

from apportion.contracts.launch import PROVIDER
from apportion.selection.utilisation import free_shares, provider_accounts
from tests.unit.selection.builders import host


def test_a_provider_takes_its_roots_account_and_a_root_its_own_uuid() -> None:
    providers = {
        "cn": host("cn", "vsphere"),
        "numa0": host("numa0", parent="cn"),
        "fpga": host("fpga", parent="numa0"),
        "lone": host("lone"),
        "own": host("own", "other", parent="cn"),
    }
    assert provider_accounts(providers) == {
        "cn": "vsphere",
        "numa0": "vsphere",
        "fpga": "vsphere",
        "lone": "lone",
        "own": "other",
    }


def test_cyclic_or_unknown_parents_do_not_hang() -> None:
    providers = {
        "x": host("x", parent="y"),
        "y": host("y", "acct", parent="x"),
        "z": host("z", parent="missing"),
    }
    owners = provider_accounts(providers)
    assert owners["z"] == "z"
    assert set(owners) == {"x", "y", "z"}


def test_free_share_averages_the_requested_classes_over_the_accounts_providers() -> None:
    providers = {
        "h1": PROVIDER.validate_python(
            {
                "uuid": "h1",
                "account": "a",
                "inventories": {
                    "VCPU": {"total": 10},
                    "MEMORY_MB": {"total": 1000, "reserved": 200},
                },
                "usages": {"VCPU": 10, "MEMORY_MB": 200},
            }
        ),
        "h2": PROVIDER.validate_python(
            {
                "uuid": "h2",
                "account": "a",
                "inventories": {"VCPU": {"total": 10, "allocation_ratio": 2.0}},
                "usages": {"VCPU": 5},
            }
        ),
        "s": PROVIDER.validate_python(
            {"uuid": "s", "account": "b", "inventories": {"DISK_GB": {"total": 100}}}
        ),
    }
    shares = free_shares(providers, ["a", "b"], ["VCPU", "MEMORY_MB"])
    # VCPU: capacity 10 + 20, free 0 + 15 → 0.5; MEMORY_MB: capacity 800, free 600 → 0.75.
    assert shares["a"] == pytest.approx((0.5 + 0.75) / 2)
    # b offers none of the requested classes: neutral (the mean of the measurable ones).
    assert shares["b"] == pytest.approx(shares["a"])
