"""docs/ and examples/ say what the code does: generated parts are current, every field,
error code, limit and setting is documented, and nothing points outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from apportion import kinds
from apportion.config.settings import Settings
from apportion.limits import Limits
from apportion.schemas import job_schema
from tests.support import gen_docs

REPO = Path(__file__).resolve().parents[2]
CONTRACT = (REPO / "docs" / "contract.md").read_text()
OPERATIONS = (REPO / "docs" / "operations.md").read_text()
README = (REPO / "README.md").read_text()


def test_the_schemas_and_example_envelopes_are_what_the_code_generates() -> None:
    # Fails after a contract or answer change until `scripts/gen-docs` is run and committed.
    assert gen_docs.stale() == []


@pytest.mark.parametrize("kind", kinds.names())
def test_every_kind_has_its_schemas_an_example_and_the_envelope_it_gets(kind: str) -> None:
    for path in (
        f"docs/schemas/{kind}.json",
        f"docs/schemas/{kind}.result.json",
        f"examples/{kind}.json",
        f"examples/{kind}.envelope.json",
    ):
        assert (REPO / path).exists(), path
    assert f"### {kind}" in CONTRACT


def _properties(schema: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(schema, dict):
        found |= set(schema.get("properties", {}))
        for value in schema.values():
            found |= _properties(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= _properties(value)
    return found


@pytest.mark.parametrize("kind", kinds.names())
def test_every_field_of_every_job_is_documented_in_the_contract(kind: str) -> None:
    undocumented = sorted(f for f in _properties(job_schema(kind)) if f"`{f}`" not in CONTRACT)

    assert undocumented == []


def _codes_in_code() -> set[str]:
    """Error codes named in the code: `code="…"` (and `code: str = "…"`) everywhere, and
    the codes the edge and the gate pass by position."""
    pattern = re.compile(r"""\bcode\s*(?:=|:\s*str\s*=)\s*["']([a-z_]+)["']""")
    positional = re.compile(r"""^\s*["']([a-z]+(?:_[a-z]+)+)["'],""", re.MULTILINE)
    found = set()
    for folder in ("src", "workers", "tasks", "config"):
        for path in (REPO / folder).rglob("*.py"):
            found |= set(pattern.findall(path.read_text()))
    for path in (REPO / "src/apportion/edge.py", REPO / "workers/broker/gate.py"):
        if path.exists():
            found |= {c for c in positional.findall(path.read_text()) if c in KNOWN_SHAPE}
    return found


# Codes the edge and the gate answer with (passed by position, not as code=).
KNOWN_SHAPE = {"number_out_of_range", "invalid_string", "reserved_key", "too_deep"}


def test_every_error_code_the_code_can_answer_is_in_the_contracts_table() -> None:
    table = CONTRACT.split("## Error codes", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", table, re.MULTILINE))

    assert _codes_in_code() - documented == set()
    assert {"invalid_job", "internal_error", "time_limit", "unknown_field"} <= documented


@pytest.mark.parametrize("name", sorted(Limits.model_fields))
def test_every_limit_is_documented_with_its_default(name: str) -> None:
    default = Limits.model_fields[name].default
    row = next((r for r in CONTRACT.splitlines() if r.startswith(f"| `{name}` |")), None)

    assert row is not None, f"{name} is not in docs/contract.md#limits"
    assert str(default) in row.replace(",", ""), row


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_every_setting_is_documented_with_its_environment_variable(name: str) -> None:
    variable = f"APPORTION_{name.upper()}"

    assert variable in README or variable in OPERATIONS, variable


def test_nothing_in_the_repository_points_outside_it() -> None:
    tracked = subprocess.run(
        ["git", "grep", "-lE", r"\.\./shared|SPEC\.md"], cwd=REPO, capture_output=True, text=True
    )
    assert tracked.returncode == 1, tracked.stdout  # 1: no match


def test_the_readme_links_the_contract_the_examples_and_operations() -> None:
    for target in ("docs/contract.md", "docs/operations.md", "examples/", "docs/schemas/"):
        assert f"]({target}" in README, target
