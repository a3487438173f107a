"""Every limit an operator can set is in the README's limits table, with its default."""

from __future__ import annotations

import re
from pathlib import Path

from apportion.limits import Limits

README = Path(__file__).resolve().parents[3] / "README.md"


def test_every_limit_is_in_the_readme_table_with_its_default() -> None:
    section = README.read_text().split("### Limits", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    documented: dict[str, str] = {}
    for row in rows:
        names_cell, defaults_cell = (cell.strip() for cell in row.strip("|").split("|")[:2])
        names = re.findall(r"`([A-Z_]+)`", names_cell)
        defaults = [d.strip().split(" ")[0] for d in defaults_cell.split(",")]
        assert len(names) == len(defaults), row
        documented.update(zip(names, defaults, strict=True))

    expected = {name.upper(): str(field.default) for name, field in Limits.model_fields.items()}
    assert documented == expected
