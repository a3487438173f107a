"""The generated parts of docs/ and examples/, and the check that they are current.

* ``docs/schemas/<kind>.json`` and ``<kind>.result.json``: the JSON Schemas of every
  registered kind's job and envelope (``apportion schema --all --out docs/schemas``).
* ``examples/<name>.envelope.json``: the envelope ``apportion solve`` answers for
  ``examples/<name>.json`` (``<name>`` is the kind, or ``<kind>.<variant>``).
* ``docs/settings.md``: every ``APPORTION_*`` setting with its default and meaning,
  from the settings model (``config/settings.py``, ``src/apportion/engine_settings.py``:
  each field's ``description``), the limits (``src/apportion/limits.py``), the built-in
  kinds' time limits and the variables single commands read (``setting_names.py``).

``scripts/gen-docs`` writes them; ``scripts/gen-docs --check`` (and
tests/contract/test_docs.py, in CI) fails when one is missing or out of date. Timing
fields (``elapsed_ms``, and a launch_outcome's ``at`` when the example leaves it to the
worker's clock) are not compared, and an envelope that differs only in them is not
rewritten, so regenerating changes nothing that did not change.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "docs" / "schemas"
SETTINGS_PAGE = REPO / "docs" / "settings.md"
EXAMPLES = REPO / "examples"
ENVELOPE_SUFFIX = ".envelope.json"
# Envelope fields that measure the run rather than describe the answer.
TIMING_FIELDS = frozenset({"elapsed_ms"})


def example_jobs() -> dict[str, Path]:
    """name → job file of each ready job in examples/ (``partition``,
    ``launch_select.candidates``)."""
    return {
        path.name.removesuffix(".json"): path
        for path in sorted(EXAMPLES.glob("*.json"))
        if not path.name.endswith(ENVELOPE_SUFFIX)
    }


def kind_of(name: str) -> str:
    return name.split(".", 1)[0]


def solve_example(name: str, path: Path) -> dict[str, Any]:
    """What ``apportion solve`` answers for the example, with the shipped defaults."""
    from apportion.engine import Context, run
    from apportion.engine_settings import load_default_policy

    context = Context(default_policy=load_default_policy(None))
    envelope: dict[str, Any] = run(kind_of(name), json.loads(path.read_text()), context).as_dict()
    return envelope


# Result fields a job may leave to the clock of whoever answers it: a launch_outcome
# sent without `at` happened when it was answered (docs/contract.md#launch_outcome), so
# the example never ages out of the failure history.
ANSWER_TIME_FIELDS: dict[str, frozenset[str]] = {"launch_outcome": frozenset({"at"})}


def without_timing(envelope: dict[str, Any]) -> dict[str, Any]:
    """The envelope without what depends on when and how fast it was answered."""
    out = {k: v for k, v in envelope.items() if k not in TIMING_FIELDS}
    clock = ANSWER_TIME_FIELDS.get(str(out.get("kind")), frozenset())
    if clock and isinstance(out.get("result"), dict):
        out["result"] = {k: v for k, v in out["result"].items() if k not in clock}
    return out


def _text(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


class UndocumentedSetting(Exception):
    """A settings field without the ``description`` docs/settings.md is made of."""


def _default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f"`{value}`"
    if isinstance(value, dict | list):
        return f"`{json.dumps(value)}`"
    return str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_page(model: type[Any] | None = None) -> str:
    """docs/settings.md, from the settings model (module doc); ``model``: another
    settings class than the worker's (for tests)."""
    from pydantic import BaseModel

    from apportion.config.settings import Settings
    from apportion.engine_settings import EngineSettings
    from apportion.kinds.builtin import BUILTIN
    from apportion.limits import LIMIT_CODES, Limits
    from apportion.setting_names import READ_ELSEWHERE

    fields = (model or Settings).model_fields
    # The service's own settings first (the Redis URL leads), the engine's after them.
    names = [n for n in fields if n not in EngineSettings.model_fields]
    names += [n for n in EngineSettings.model_fields if n != "limits"] + ["limits"]
    rows = []
    for name in names:
        info = fields[name]
        if not info.description:
            raise UndocumentedSetting(
                f"the setting {name!r} has no description=: docs/settings.md is generated "
                "from it (config/settings.py or src/apportion/engine_settings.py)"
            )
        if name == "time_limits":
            default = "each kind its own (below)"
        elif isinstance(info.default, BaseModel):
            default = "see [Limits](#limits)"
        elif info.default_factory is not None:
            default = _default(info.default_factory())  # type: ignore[call-arg]
        else:
            default = _default(info.default)
        rows.append(f"| `APPORTION_{name.upper()}` | {default} | {_cell(info.description)} |")
    time_rows = [
        f"| `{kind.name}` | `{kind.queue}` | {kind.soft_time_limit:g} | {kind.time_limit:g} |"
        for kind in BUILTIN
    ]
    limit_rows = []
    for name, info in Limits.model_fields.items():
        code = LIMIT_CODES[name]
        over = f"`{code}`" if code is not None else "— (the answer is cut short)"
        limit_rows.append(f"| `APPORTION_LIMITS__{name.upper()}` | {info.default} | {over} |")
    elsewhere = [
        f"| `{variable}` | {_cell(text)} |"
        for variable, text in READ_ELSEWHERE.items()
        if not text.startswith("tests:")
    ]
    return "\n".join(
        [
            "# Settings",
            "",
            "<!-- Generated by scripts/gen-docs from the settings model: edit the fields'",
            "descriptions in config/settings.py and src/apportion/engine_settings.py, then run",
            "scripts/gen-docs. tests/contract/test_docs.py checks this page is current. -->",
            "",
            "Every setting is an environment variable, read when a worker or a command starts.",
            "Nested values use `__` (`APPORTION_LIMITS__MAX_POOLS=100000`,",
            "`APPORTION_TIME_LIMITS__PARTITION__HARD=120`). An `APPORTION_*` variable that is",
            "none of these stops the worker and every command at start-up, naming the closest",
            "one (`…_REDIS_ULR`: did you mean `APPORTION_REDIS_URL`?): a misspelt",
            "setting never falls back to its default silently. `apportion solve` and",
            "`apportion explain` check the same names, so one environment serves them all. A",
            "setting that would make the worker unsafe (a visibility timeout shorter than a",
            "hard time limit) is refused at start-up with the reason.",
            "",
            "| variable | default | meaning |",
            "|---|---|---|",
            *rows,
            "",
            "## Time limits",
            "",
            "Each kind's own soft and hard limits, in seconds, until",
            "`APPORTION_TIME_LIMITS__<QUEUE>__SOFT` / `__HARD` set its queue's:",
            "",
            "| kind | queue | soft | hard |",
            "|---|---|---|---|",
            *time_rows,
            "",
            "## Limits",
            "",
            "What each bounds is in [contract.md](contract.md#limits); a job over one is",
            "answered `rejected` with the code below and a message naming the variable.",
            "",
            "| variable | default | a job over it |",
            "|---|---|---|",
            *limit_rows,
            "",
            "## Read by one command",
            "",
            "| variable | what |",
            "|---|---|",
            *elsewhere,
            "",
        ]
    )


def wanted() -> dict[Path, str]:
    """Every generated file and the text it should have."""
    from apportion.schemas import schema_files

    out = {SCHEMAS / name: data.decode() for name, data in schema_files().items()}
    out[SETTINGS_PAGE] = settings_page()
    for name, path in example_jobs().items():
        envelope = solve_example(name, path)
        target = EXAMPLES / f"{name}{ENVELOPE_SUFFIX}"
        if target.exists():
            current = json.loads(target.read_text())
            if without_timing(current) == without_timing(envelope):
                envelope = current  # keep the recorded timings: no churn
        out[target] = _text(envelope)
    return out


def stale() -> list[str]:
    """Generated files that are missing, out of date, or left over (for the check)."""
    expected = wanted()
    problems = []
    for path, text in expected.items():
        if not path.exists():
            problems.append(f"{path.relative_to(REPO)} is missing")
        elif path.read_text() != text:
            problems.append(f"{path.relative_to(REPO)} is out of date")
    for path in [*SCHEMAS.glob("*.json"), *EXAMPLES.glob(f"*{ENVELOPE_SUFFIX}")]:
        if path not in expected:
            problems.append(f"{path.relative_to(REPO)} belongs to no kind or example")
    return problems


def write() -> list[Path]:
    written = []
    SCHEMAS.mkdir(parents=True, exist_ok=True)
    expected = wanted()
    for path, text in expected.items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            written.append(path)
    for path in [*SCHEMAS.glob("*.json"), *EXAMPLES.glob(f"*{ENVELOPE_SUFFIX}")]:
        if path not in expected:
            path.unlink()
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/gen-docs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail when anything is stale")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale()
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print("run scripts/gen-docs and commit the result", file=sys.stderr)
        return 1 if problems else 0
    for path in write():
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
