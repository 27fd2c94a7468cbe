"""The code passes the project's linters as configured in pyproject.toml: ruff's rules (line length 120, complexity at
most 12, at most 50 statements a function, imports sorted) and ruff's formatting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

RUFF = Path(sys.executable).with_name("ruff")


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff(command):
    if not RUFF.is_file():
        pytest.fail(f"{RUFF}: ruff is not installed; `make lint` and `make test` install the dev extra")
    result = subprocess.run([str(RUFF), *command, "--no-cache", "."], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
