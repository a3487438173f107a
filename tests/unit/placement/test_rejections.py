"""Every malformed query is rejected at path ``request`` with Placement's words."""

from __future__ import annotations

import pytest

from apportion.engine import Context, run
from apportion.errors import Rejected
from apportion.limits import Limits
from tests.unit.placement.helpers import find, rejection, rp

HOST = [rp("cn", VCPU=4)]


@pytest.mark.parametrize(
    ("request_text", "message"),
    [
        (
            "resources=VCPU",
            "Badly formed resources parameter. Expected resources query string parameter in "
            "form: ?resources=VCPU:2,MEMORY_MB:1024. Got: VCPU.",
        ),
        (
            "resources=",
            "Badly formed resources parameter. Expected resources query string parameter in "
            "form: ?resources=VCPU:2,MEMORY_MB:1024. Got: empty string.",
        ),
        (
            "resources=VCPU:1:2",
            "Badly formed resources parameter. Expected resources query string parameter in "
            "form: ?resources=VCPU:2,MEMORY_MB:1024. Got: VCPU:1:2.",
        ),
        ("resources=VCPU:0", "Requested resource VCPU requires amount >= 1. Got: 0."),
        ("resources=VCPU:-3", "Requested resource VCPU requires amount >= 1. Got: -3."),
        (
            "resources=VCPU:two",
            "Requested resource VCPU expected positive integer amount. Got: two.",
        ),
        (
            "resources=VCPU:9007199254740992",
            "Requested resource VCPU requires amount <= 9007199254740991. Got: 9007199254740992.",
        ),
        (
            "resources=VCPU:1,VCPU:2",
            "Requested resource VCPU is specified more than once in: VCPU:1,VCPU:2.",
        ),
        (
            "resources=vcpu:1",
            "Invalid resource class in resources parameter: 'vcpu' is not a valid resource "
            "class name (expected [A-Z0-9_]+).",
        ),
    ],
)
def test_a_malformed_resources_value_is_rejected(request_text: str, message: str) -> None:
    assert rejection(HOST, request_text) == message


@pytest.mark.parametrize(
    ("request_text", "message"),
    [
        (
            "resources=VCPU:1&required=HW_X,!HW_X",
            "Conflicting required and forbidden traits found in the following traits keys: "
            "required: (HW_X)",
        ),
        (
            "resources_A=VCPU:1&required_A=in:T1,T2&required_A=!T1,!T2",
            "Conflicting required and forbidden traits found in the following traits keys: "
            "required_A: (T1, T2)",
        ),
        (
            "resources=VCPU:1&required=HW_X,",
            "Invalid query string parameters: Expected 'required' parameter value of the form: "
            "HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait in: HW_X,",
        ),
        (
            "resources=VCPU:1&required=in:T1,",
            "Invalid query string parameters: Expected 'required' parameter value of the form: "
            "in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: in:T1,",
        ),
        (
            "resources=VCPU:1&required=in:T1,!T2",
            "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does "
            "not support forbidden traits. Got: in:T1,!T2",
        ),
        (
            "resources=VCPU:1&required=!!T1",
            "Invalid query string parameters: Expected 'required' parameter value of the form: "
            "HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an invalid trait name '!T1' in: !!T1",
        ),
        (
            "resources=VCPU:1&required=hw_x",
            "Invalid query string parameters: Expected 'required' parameter value of the form: "
            "HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an invalid trait name 'hw_x' in: hw_x",
        ),
    ],
)
def test_malformed_or_conflicting_traits_are_rejected(request_text: str, message: str) -> None:
    assert rejection(HOST, request_text) == message


@pytest.mark.parametrize(
    ("request_text", "message"),
    [
        (
            "resources=VCPU:1&root_required=T1&root_required=T2",
            "Query parameter 'root_required' may be specified only once.",
        ),
        (
            "resources=VCPU:1&root_required=T1,!T1",
            "Conflicting required and forbidden traits found in root_required: T1",
        ),
        (
            "resources=VCPU:1&root_required=in:T1,T2",
            "Invalid query string parameters: 'root_required' does not support the 'in:' "
            "prefix. Got: in:T1,T2",
        ),
    ],
)
def test_root_required_is_checked(request_text: str, message: str) -> None:
    assert rejection(HOST, request_text) == message


@pytest.mark.parametrize(
    ("request_text", "message"),
    [
        ("required=HW_X", "There must be at least one resources or resources[$S] parameter."),
        ("limit=3", "There must be at least one resources or resources[$S] parameter."),
        ("", "There must be at least one resources or resources[$S] parameter."),
        (
            "resources=VCPU:1&required_X=FOO",
            "Resourceless suffixed group request should be specified in `same_subtree` query "
            "param: bad group(s) - ['_X'].",
        ),
        (
            "resources_A=VCPU:1&same_subtree=_A,_B",
            "Real suffixes should be specified in `same_subtree`: ['_B'] not found in ['_A'].",
        ),
        (
            "resources_A=VCPU:1&same_subtree=_A,",
            "Empty string (unsuffixed group) can not be specified in `same_subtree`",
        ),
    ],
)
def test_group_structure_is_checked(request_text: str, message: str) -> None:
    assert rejection(HOST, request_text) == message


@pytest.mark.parametrize(
    ("request_text", "message"),
    [
        (
            "resources=VCPU:1&foo=1",
            "Invalid query string parameters: Additional properties are not allowed "
            "('foo' was unexpected)",
        ),
        (
            "resources" + "x" * 65 + "=VCPU:1",
            "Invalid query string parameters: Additional properties are not allowed "
            f"('resources{'x' * 65}' was unexpected)",
        ),
        (
            "resources.A=VCPU:1",
            "Invalid query string parameters: Additional properties are not allowed "
            "('resources.A' was unexpected)",
        ),
        (
            "resources=VCPU:1&group_policy=strict",
            "Invalid query string parameters: 'strict' is not one of ['none', 'isolate']",
        ),
        (
            "resources=VCPU:1&limit=0",
            "Invalid query string parameters: '0' does not match '^[1-9][0-9]*$'",
        ),
        (
            "resources=VCPU:1&limit=ten",
            "Invalid query string parameters: 'ten' does not match '^[1-9][0-9]*$'",
        ),
        (
            "resources=VCPU:1&limit=1&limit=ten",
            "Invalid query string parameters: 'ten' does not match '^[1-9][0-9]*$'",
        ),
        (
            "resources=VCPU:1&group_policy=isolate&group_policy=all",
            "Invalid query string parameters: 'all' is not one of ['none', 'isolate']",
        ),
        (
            "resources=VCPU:1&resources=VCPU:2",
            "Query parameter 'resources' may be specified only once.",
        ),
        (
            "resources_A=VCPU:1&in_tree_A=cn&in_tree_A=cn",
            "Query parameter 'in_tree_A' may be specified only once.",
        ),
        (
            "resources=VCPU:1&in_tree=",
            "Invalid query string parameters: Expected 'in_tree' parameter to name a provider. "
            "Got an empty value.",
        ),
        (
            "resources=VCPU:1&member_of=agg1,agg2",
            "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword "
            "using the valid microversion. Got: agg1,agg2",
        ),
        (
            "resources=VCPU:1&member_of=in:agg1,",
            "Invalid query string parameters: Expected 'member_of' parameter to contain "
            "aggregate name(s). Got an empty name in: in:agg1,",
        ),
    ],
)
def test_unknown_or_malformed_parameters_are_rejected(request_text: str, message: str) -> None:
    assert rejection(HOST, request_text) == message


def test_a_request_longer_than_the_limit_is_rejected() -> None:
    limits = Limits(max_request_length=20)
    ctx = Context(limits=limits)
    env = run(
        "launch_select",
        {"providers": HOST, "request": "resources=VCPU:1&limit=1000", "policy": None},
        ctx,
    )
    assert env.status == "rejected"
    assert env.error is not None
    assert env.error.details[0].path == "request"
    assert env.error.details[0].message == (
        "request of 27 characters exceeds the limit of 20 "
        "(raise APPORTION_LIMITS__MAX_REQUEST_LENGTH)"
    )


def test_more_groups_than_the_limit_are_rejected() -> None:
    with pytest.raises(
        Rejected, match=r"more than 2 request groups \(raise APPORTION_LIMITS__MAX_REQUEST_GROUPS\)"
    ):
        find(
            HOST,
            "resources_A=VCPU:1&resources_B=VCPU:1&resources_C=VCPU:1",
            Limits(max_request_groups=2),
        )


def test_a_rejection_reaches_the_envelope_with_its_path() -> None:
    env = run("launch_select", {"providers": HOST, "request": "resources=VCPU:0", "policy": None})
    assert env.status == "rejected"
    assert env.error is not None
    assert env.error.message == "request: Requested resource VCPU requires amount >= 1. Got: 0."
    assert [(d.path, d.message) for d in env.error.details] == [
        ("request", "Requested resource VCPU requires amount >= 1. Got: 0.")
    ]


def test_the_query_may_be_pasted_from_the_documentation() -> None:
    """A leading '?', line breaks and spaces around '&' are accepted; values are
    percent-decoded."""
    cs = find(HOST, "?resources=VCPU%3A1\n  &limit=1 ")
    assert len(cs.requests) == 1
