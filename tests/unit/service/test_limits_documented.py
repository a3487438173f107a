"""Every limit an operator can set is in docs/settings.md's limits table, with its default."""

from __future__ import annotations

import re
from pathlib import Path

from apportion.limits import Limits

SETTINGS = Path(__file__).resolve().parents[3] / "docs" / "settings.md"


def test_every_limit_is_in_the_settings_page_with_its_default() -> None:
    section = SETTINGS.read_text().split("## Limits", 1)[1].split("\n## ", 1)[0]
    documented = dict(
        re.findall(r"^\| `APPORTION_LIMITS__([A-Z_]+)` \| ([0-9.]+) \|", section, re.M)
    )

    expected = {name.upper(): str(field.default) for name, field in Limits.model_fields.items()}
    assert documented == expected
