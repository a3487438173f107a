"""docs/ and examples/ say what the code does: generated parts are current, every field,
error code, limit and setting is documented, and nothing points outside the repository."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from apportion import kinds
from apportion.config.settings import Settings
from apportion.limits import LIMIT_CODES, Limits
from apportion.schemas import job_schema
from apportion.workers.redis.keys import Keys
from tests.support import gen_docs

REPO = Path(__file__).resolve().parents[2]
CONTRACT = (REPO / "docs" / "contract.md").read_text()
OPERATIONS = (REPO / "docs" / "operations.md").read_text()
README = (REPO / "README.md").read_text()
SETTINGS = (REPO / "docs" / "settings.md").read_text()


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


def _python_trees() -> list[ast.Module]:
    return [
        ast.parse(path.read_text())
        for folder in ("src", "workers", "tasks", "config")
        for path in sorted((REPO / folder).rglob("*.py"))
    ]


def _code_takers(trees: list[ast.Module]) -> set[str]:
    """Names of what takes an error code as its first argument: a function whose first
    parameter is ``code`` (``_verdict``), a class whose ``__init__``'s is, or a dataclass
    whose first field is (``ShapeProblem``, ``ErrorInfo``)."""
    takers = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                params = [a.arg for a in node.args.args if a.arg not in ("self", "cls")]
                if params[:1] == ["code"]:
                    takers.add(node.name)
            elif isinstance(node, ast.ClassDef):
                fields = [s.target for s in node.body if isinstance(s, ast.AnnAssign)]
                if fields and isinstance(fields[0], ast.Name) and fields[0].id == "code":
                    takers.add(node.name)
                init = next(
                    (
                        f
                        for f in node.body
                        if isinstance(f, ast.FunctionDef) and f.name == "__init__"
                    ),
                    None,
                )
                if init is not None and [a.arg for a in init.args.args[1:2]] == ["code"]:
                    takers.add(node.name)
    return takers


def _constants(tree: ast.Module) -> dict[str, str]:
    """A module's top-level ``NAME = "text"`` (``CODE = "unknown_field"``)."""
    return {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def _text(node: ast.AST | None, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return constants.get(node.id) if isinstance(node, ast.Name) else None


def _callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _codes_in_code() -> set[str]:
    """Error codes the code can answer with, wherever it names one: ``code="…"`` in a
    call, ``code = "…"`` (or ``code: str = "…"``) as a default, and a code passed by
    position to whatever takes a code first (``ShapeProblem("invalid_json", …)``); a
    module's constant (``code=CODE``) counts as its text."""
    trees = _python_trees()
    takers = _code_takers(trees)
    found: set[str | None] = set()
    for tree in trees:
        constants = _constants(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                found |= {_text(k.value, constants) for k in node.keywords if k.arg == "code"}
                if node.args and _callee(node) in takers:
                    found.add(_text(node.args[0], constants))
            elif isinstance(node, ast.Assign):
                if any(isinstance(t, ast.Name) and t.id == "code" for t in node.targets):
                    found.add(_text(node.value, constants))
            elif (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id == "code"
            ):
                found.add(_text(node.value, constants))
    return {code for code in found if code is not None}


def test_error_codes_passed_by_position_or_as_a_constant_are_found() -> None:
    # The edge answers these as ShapeProblem("…", …), the gate as _verdict("…", …),
    # unknown_fields.py as code=CODE.
    assert {"invalid_json", "number_out_of_range", "reserved_key", "too_deep"} <= _codes_in_code()
    assert "unknown_field" in _codes_in_code()


def test_every_error_code_the_code_can_answer_is_in_the_contracts_table() -> None:
    table = CONTRACT.split("## Error codes", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", table, re.MULTILINE))

    assert _codes_in_code() - documented == set()
    assert {"invalid_job", "internal_error", "time_limit", "unknown_field"} <= documented


def _key_patterns() -> dict[str, str]:
    """Every key workers/redis/keys.py names, each parameter shown as ``<name>``
    (``apportion:published:<kind>:<job_id>``); a bare prefix or a list is skipped."""
    keys = Keys("apportion")
    patterns = {}
    for name, member in vars(Keys).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            value = getattr(keys, name)
        elif inspect.isfunction(member):
            params = list(inspect.signature(member).parameters)[1:]
            value = member(keys, *(f"<{p}>" for p in params))
        else:
            continue
        if isinstance(value, str) and not value.endswith(":"):
            patterns[name] = value
    return patterns


def test_the_key_patterns_are_read_from_every_method_of_keys() -> None:
    assert _key_patterns()["delivery_count"] == "apportion:deliveries:<delivery_tag>"
    assert _key_patterns()["dead_letters_stream"] == "apportion:dead-letters"
    assert len(_key_patterns()) == 14  # every method and property but the bare prefix


@pytest.mark.parametrize(("method", "key"), sorted(_key_patterns().items()))
def test_every_key_apportion_writes_is_in_the_contracts_table(method: str, key: str) -> None:
    table = CONTRACT.split("## Streams and keys", 1)[1].split("\n## ", 1)[0]
    named = {
        name
        for row in table.splitlines()
        if row.startswith("| `")
        for name in re.findall(r"`([^`]+)`", row.split(" | ", 1)[0])
    }
    # A parameter may be written as one value the code passes (recent-jobs:launch_select).
    shape = re.compile(
        "".join(
            "[a-z_]+" if part.startswith("<") else re.escape(part)
            for part in re.split(r"(<[a-z_]+>)", key)
        )
    )

    assert key in named or any(shape.fullmatch(name) for name in named), (method, key)


@pytest.mark.parametrize("name", sorted(Limits.model_fields))
def test_every_limit_is_documented_with_its_default(name: str) -> None:
    default = Limits.model_fields[name].default
    row = next((r for r in CONTRACT.splitlines() if r.startswith(f"| `{name}` |")), None)

    assert row is not None, f"{name} is not in docs/contract.md#limits"
    assert str(default) in row.replace(",", ""), row


@pytest.mark.parametrize("name", sorted(Limits.model_fields))
def test_every_limit_is_documented_with_the_code_a_job_over_it_gets(name: str) -> None:
    row = next(r for r in CONTRACT.splitlines() if r.startswith(f"| `{name}` |"))
    over = row.strip("|").split("|")[3].strip()
    code = LIMIT_CODES[name]

    assert over.startswith("—" if code is None else f"`{code}`"), row


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_every_setting_is_documented_with_its_environment_variable(name: str) -> None:
    variable = f"APPORTION_{name.upper()}"

    assert f"| `{variable}` |" in SETTINGS, variable


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_every_setting_says_what_it_means_for_the_settings_page(name: str) -> None:
    # docs/settings.md is made of these descriptions (scripts/gen-docs).
    assert Settings.model_fields[name].description, f"{name} has no description="


def test_the_settings_page_is_what_scripts_gen_docs_makes_of_the_settings_model() -> None:
    # Fails after a setting is added or its description or default changes, until
    # `scripts/gen-docs` is run and committed.
    assert gen_docs.settings_page() == SETTINGS
    assert "| `APPORTION_REDIS_URL` | `redis://127.0.0.1:6379/0` |" in SETTINGS
    assert "| `APPORTION_LIMITS__MAX_POOLS` | 50000 | `limit_exceeded` |" in SETTINGS
    assert "| `launch_select` | `launch` | 30 | 45 |" in SETTINGS


def test_the_settings_page_is_generated_even_for_a_setting_added_later() -> None:
    from pydantic import Field

    class Later(Settings):
        later_setting: int = Field(7, description="a setting added after this test")

    assert "| `APPORTION_LATER_SETTING` | 7 | a setting added after this test |" in (
        gen_docs.settings_page(Later)
    )

    class Undocumented(Settings):
        undocumented: int = 7

    with pytest.raises(gen_docs.UndocumentedSetting, match="undocumented"):
        gen_docs.settings_page(Undocumented)


def test_nothing_in_the_repository_points_outside_it() -> None:
    tracked = subprocess.run(
        ["git", "grep", "-lE", r"\.\./shared|SPEC\.md"], cwd=REPO, capture_output=True, text=True
    )
    assert tracked.returncode == 1, tracked.stdout  # 1: no match


def test_the_readme_links_the_contract_the_examples_and_operations() -> None:
    for target in ("docs/contract.md", "docs/operations.md", "examples/", "docs/schemas/"):
        assert f"]({target}" in README, target
