"""The code base stays ruff-clean (lint and format), checked with the pinned test tools."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def ruff() -> list[str]:
    beside_python = Path(sys.executable).with_name("ruff")
    if beside_python.is_file():
        return [str(beside_python)]
    found = shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]' installs it)")
    return [found]


@pytest.mark.parametrize("arguments", [["check"], ["format", "--check"]])
def test_ruff(arguments: list[str]) -> None:
    result = subprocess.run(
        [*ruff(), *arguments, "."], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
