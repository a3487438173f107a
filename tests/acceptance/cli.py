"""Run the installed ``apportion`` command the way a user does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

APPORTION = str(Path(sys.executable).with_name("apportion"))


def apportion(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [APPORTION, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def output_json(proc: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(proc.stdout)
