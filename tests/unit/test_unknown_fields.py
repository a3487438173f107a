"""Unknown fields: a warning in the envelope naming the field and the closest known name;
`strict: true` turns them into a rejection; Candlepin's server fields stay quiet."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from apportion import kinds
from apportion.contracts.partition import Space
from apportion.engine import Context, run
from apportion.engine_settings import EngineSettings, engine_context
from apportion.unknown_fields import (
    MAX_WARNINGS,
    OPEN_KEYS_EXAMINED,
    POOL_ATTRIBUTES,
    _suggest_short,
    find,
)
from tests.conftest import load_example

ATTACH_SOURCES = Path(__file__).resolve().parents[2] / "src" / "apportion" / "attach"


def warnings_of(kind: str, job: dict[str, Any]) -> list[dict[str, str]]:
    envelope = run(kind, job).as_dict()
    return list(envelope.get("warnings", []))


def test_the_examples_have_no_unknown_fields_and_their_envelopes_no_warnings_key() -> None:
    for name, kind in [
        ("partition.json", "partition"),
        ("auto_attach.json", "auto_attach"),
        ("guest_host_attach.json", "guest_host_attach"),
        ("launch_select.json", "launch_select"),
        ("launch_select.candidates.json", "launch_select"),
        ("launch_outcome.json", "launch_outcome"),
    ]:
        assert "warnings" not in run(kind, load_example(name)).as_dict(), name


def test_a_misspelled_best_with_disks_is_named_with_the_field_it_meant() -> None:
    job = load_example("partition.json")
    job["schema"][3]["best_with_disk"] = job["schema"][3].pop("best_with_disks")

    envelope = run("partition", job).as_dict()

    assert envelope["status"] == "ok"  # accepted, as before: only now it says so
    assert envelope["warnings"] == [
        {
            "path": "schema[3].best_with_disk",
            "code": "unknown_field",
            "message": "unknown field 'best_with_disk' ignored; did you mean 'best_with_disks'?",
        }
    ]


def test_nested_objects_of_launch_select_are_checked_policy_modules_accounts_inventories() -> None:
    job = load_example("launch_select.json")
    job["policy"][2]["precent"] = 7
    job["accounts"]["ec2"]["prioirty"] = 3
    job["providers"][0]["inventories"]["VCPU"]["step"] = 2

    found = {w["path"]: w["message"] for w in warnings_of("launch_select", job)}

    assert found == {
        "policy[2].precent": "unknown field 'precent' ignored; did you mean 'percent'?",
        "accounts.ec2.prioirty": "unknown field 'prioirty' ignored; did you mean 'priority'?",
        "providers[0].inventories.VCPU.step": (
            "unknown field 'step' ignored; did you mean 'step_size'?"
        ),
    }


def test_a_misspelled_pool_attribute_is_warned_in_both_of_candlepins_forms() -> None:
    job = load_example("auto_attach.json")
    job["pools"][0]["product_attributes"]["instance_multiplyer"] = "2"
    job["pools"][0]["attributes"] = [{"name": "virt_limt", "value": "4"}]

    found = {w["path"]: w["message"] for w in warnings_of("auto_attach", job)}

    assert found == {
        "pools[0].product_attributes.instance_multiplyer": (
            "unknown attribute 'instance_multiplyer' ignored; did you mean 'instance_multiplier'?"
        ),
        "pools[0].attributes[0].name": (
            "unknown attribute 'virt_limt' ignored; did you mean 'virt_limit'?"
        ),
    }


def test_candlepins_whole_server_objects_raise_no_warning() -> None:
    job = load_example("auto_attach.json")
    job["consumer"] |= {"href": "/consumers/c-1", "owner": {"key": "acme"}, "id": "8a8b"}
    job["consumer"]["installed_products"] = [
        {"productId": "product1", "productName": "RHEL", "arch": "x86_64"}
    ]
    pool = job["pools"][0]
    pool |= {
        "href": "/pools/pool-1",
        "owner": {"key": "acme"},
        "created": "2026-01-01T00:00:00Z",
        "contractNumber": "42",
        "productName": "SKU one",
        "type": "NORMAL",
        "calculatedAttributes": {"suggested_quantity": "1"},
    }
    pool["attributes"] = [{"name": "support_level", "value": "Premium"}, {"name": "x", "value": 1}]

    assert warnings_of("auto_attach", job) == []


def test_camel_case_names_are_known_fields_not_unknown_ones() -> None:
    job = load_example("auto_attach.json")
    pool = job["pools"][0]
    pool["productId"] = pool.pop("product_id")
    pool["providedProducts"] = pool.pop("provided_products")

    assert warnings_of("auto_attach", job) == []


def test_a_spaces_own_keys_pass_but_a_near_miss_of_a_known_one_is_warned() -> None:
    job = load_example("partition.json")
    job["schema"][1] |= {"file_system": "xfs", "mkfs_options": "-K", "min_sise": 10}

    assert [w["path"] for w in warnings_of("partition", job)] == ["schema[1].min_sise"]


def test_the_same_unknown_field_in_two_thousand_pools_is_one_warning_with_a_count() -> None:
    job = load_example("auto_attach.json")
    job["pools"] = [dict(job["pools"][0], id=f"p{i}", quantitty=1) for i in range(2000)]

    assert warnings_of("auto_attach", job) == [
        {
            "path": "pools[0].quantitty",
            "code": "unknown_field",
            "message": "unknown field 'quantitty' ignored; did you mean 'quantity'? "
            "(also at 1999 other places)",
        }
    ]


def test_warnings_are_capped_and_say_how_many_were_left_out() -> None:
    job = load_example("partition.json")
    job |= {f"extra_{i}": i for i in range(MAX_WARNINGS + 10)}

    found = warnings_of("partition", job)

    assert len(found) == MAX_WARNINGS
    assert found[-1]["message"] == "11 more unknown fields not listed"


def test_a_rejected_job_names_the_misspelling_behind_a_missing_field() -> None:
    job = load_example("launch_outcome.json")
    job["acount"] = job.pop("account")

    envelope = run("launch_outcome", job).as_dict()

    assert envelope["status"] == "rejected"
    assert envelope["error"]["details"][0]["path"] == "account"
    assert envelope["warnings"][0]["message"].endswith("did you mean 'account'?")


def test_a_strict_job_with_unknown_fields_is_rejected_naming_each() -> None:
    job = load_example("partition.json") | {"strict": True, "hardwre": {}}
    job["schema"][1]["weigth"] = 2

    envelope = run("partition", job).as_dict()

    assert envelope["status"] == "rejected"
    assert envelope["error"]["code"] == "unknown_field"
    assert [(d["path"], d["message"]) for d in envelope["error"]["details"]] == [
        ("hardwre", "unknown field 'hardwre'; did you mean 'hardware'?"),
        ("schema[1].weigth", "unknown field 'weigth'; did you mean 'weight'?"),
    ]


def test_a_strict_job_without_unknown_fields_is_answered_as_usual() -> None:
    job = load_example("partition.json") | {"strict": True}

    assert run("partition", job).status == "ok"


def test_every_pool_attribute_warned_about_is_one_the_attach_engine_reads() -> None:
    source = "\n".join(p.read_text() for p in ATTACH_SOURCES.glob("*.py"))

    for name in POOL_ATTRIBUTES:
        assert f'"{name}"' in source, name


EXAMPLES = {
    "partition": "partition.json",
    "auto_attach": "auto_attach.json",
    "launch_select": "launch_select.json",
    "launch_outcome": "launch_outcome.json",
}


def _objects(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every JSON object in ``value`` that is not a free-form map."""
    out = []
    if isinstance(value, dict):
        out.append(path)
        for key, child in value.items():
            if key not in {"attributes", "product_attributes", "facts", "usages", "prices"}:
                out += _objects(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out += _objects(child, (*path, i))
    return out


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(sorted(EXAMPLES)),
    pick=st.integers(min_value=0),
    key=st.from_regex(r"zz_[a-z]{3,12}", fullmatch=True),
)
def test_an_unknown_field_added_anywhere_changes_nothing_but_one_warning(
    kind: str, pick: int, key: str
) -> None:
    base = load_example(EXAMPLES[kind])
    job = copy.deepcopy(base)
    places = [p for p in _objects(job) if not _free_form(kind, p)]
    place = places[pick % len(places)]
    _at(job, place)[key] = 1

    # One clock for both: a launch_outcome without `at` happened at the clock's now.
    context = Context()
    before = run(kind, base, context).as_dict()
    after = run(kind, job, context).as_dict()

    warnings = after.pop("warnings", [])
    assert [w["message"].split("'")[1] for w in warnings] == [key]
    assert re.sub(r"\[\d+\]", "", warnings[0]["path"]).endswith(key)
    for envelope in (before, after):
        envelope.pop("elapsed_ms")
    assert after == before


def _free_form(kind: str, path: tuple[Any, ...]) -> bool:
    """Maps whose keys are the user's own (accounts, failures, inventories by class, the
    hardware document and a space's extra keys kept on purpose)."""
    names = {p for p in path if isinstance(p, str)}
    if kind == "partition":
        return "hardware" in names or (len(path) == 2 and path[0] == "schema")
    if kind == "launch_select":
        return path in (("accounts",), ("failures",)) or path[-1:] == ("inventories",)
    return False


def test_find_is_idempotent_over_json_text_and_decoded_json() -> None:
    job = load_example("partition.json") | {"hardwre": {}}
    model = kinds.get("partition").job

    assert find(model, job) == find(model, json.loads(json.dumps(job)))


def test_a_huge_unknown_key_is_quoted_short() -> None:
    job = load_example("partition.json") | {"k" * 60_000: 1}

    (warning,) = warnings_of("partition", job)

    assert len(warning["message"]) < 150
    assert len(warning["path"]) <= 200


def test_an_open_objects_near_misses_are_looked_for_among_its_first_extra_keys() -> None:
    """A partition job's hardware keeps any keys; among a hundred thousand of them, a
    near-miss of `disks` is warned when it comes within the first OPEN_KEYS_EXAMINED."""
    job = load_example("partition.json")
    early = copy.deepcopy(job)
    early["hardware"] = {"disk": [], **{f"k{i}": i for i in range(100_000)}, **job["hardware"]}
    late = copy.deepcopy(job)
    late["hardware"] = {**{f"k{i}": i for i in range(OPEN_KEYS_EXAMINED)}, "disk": []}
    late["hardware"].update(job["hardware"])

    assert [w.path for w in find(kinds.get("partition").job, early)] == ["hardware.disk"]
    assert find(kinds.get("partition").job, late) == ()


def test_a_key_far_longer_than_every_field_name_is_no_misspelling_and_is_not_remembered() -> None:
    before = _suggest_short.cache_info().currsize
    job = load_example("partition.json")
    job["hardware"]["d" + "i" * 60_000] = 1

    assert find(kinds.get("partition").job, job) == ()
    assert _suggest_short.cache_info().currsize == before


# ---- the deployment's default: APPORTION_UNKNOWN_FIELDS ------------------------------


def _misspelt_partition() -> dict[str, Any]:
    job = load_example("partition.json")
    job["schema"][3]["min_szie"] = 5  # a partition space keeps extra keys: an open model
    return job


def test_a_misspelt_space_field_is_never_echoed_into_the_result_only_warned() -> None:
    job = _misspelt_partition()
    job["schema"][3]["file_system"] = "xfs"  # a key of the space's own: passed through

    envelope = run("partition", job).as_dict()

    assert envelope["status"] == "ok"
    assert [w["path"] for w in envelope["warnings"]] == ["schema[3].min_szie"]
    assert "min_szie" not in json.dumps(envelope["result"])
    placed = [p for p in envelope["result"]["partitions"] if p["id"] == "ceph-journal"]
    assert [p["attributes"] for p in placed] == [{"file_system": "xfs"}]


def test_the_deployment_rejecting_unknown_fields_rejects_a_job_that_does_not_say_strict() -> None:
    ctx = engine_context(EngineSettings(unknown_fields="reject"))

    envelope = run("partition", _misspelt_partition(), ctx).as_dict()

    assert envelope["status"] == "rejected"
    assert envelope["result"] is None
    assert envelope["error"]["code"] == "unknown_field"
    assert envelope["error"]["details"] == [
        {
            "path": "schema[3].min_szie",
            "message": "unknown field 'min_szie'; did you mean 'min_size'?",
        }
    ]
    assert "this deployment rejects jobs with unknown fields" in envelope["error"]["message"]


def test_a_jobs_own_strict_false_keeps_warnings_where_the_deployment_rejects() -> None:
    ctx = engine_context(EngineSettings(unknown_fields="reject"))

    envelope = run("partition", _misspelt_partition() | {"strict": False}, ctx).as_dict()

    assert envelope["status"] == "ok"
    assert [w["path"] for w in envelope["warnings"]] == ["schema[3].min_szie"]


def test_a_jobs_own_strict_true_rejects_where_the_deployment_only_warns() -> None:
    ctx = engine_context(EngineSettings(unknown_fields="warn"))

    envelope = run("partition", _misspelt_partition() | {"strict": True}, ctx).as_dict()

    assert envelope["status"] == "rejected"
    assert "a strict job may not have unknown fields" in envelope["error"]["message"]


def test_the_deployment_rejecting_unknown_fields_answers_a_clean_job_as_usual() -> None:
    ctx = engine_context(EngineSettings(unknown_fields="reject"))

    assert run("partition", load_example("partition.json"), ctx).status == "ok"


@settings(max_examples=60, deadline=None)
@given(
    key=st.one_of(
        st.from_regex(r"[a-z][a-z_]{0,14}", fullmatch=True),
        st.sampled_from(["min_szie", "maxsize", "wieght", "best_with", "mont", "fs_typ", "label"]),
    )
)
def test_an_extra_space_key_is_either_passed_through_or_warned_about_never_both(key: str) -> None:
    assume(key not in Space.model_fields)
    job = load_example("partition.json")
    job["schema"][3][key] = "x"

    envelope = run("partition", job).as_dict()

    assert envelope["status"] == "ok"
    warned = [w for w in envelope.get("warnings", []) if w["path"] == f"schema[3].{key}"]
    [placed] = [p for p in envelope["result"]["partitions"] if p["id"] == "ceph-journal"]
    assert (key in placed["attributes"]) != bool(warned)
