"""The GitHub Actions workflow that forks run is valid by GitHub's workflow schema and runs what CI runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.helpers import REPO

WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"


def check_jsonschema(path: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("check-jsonschema")  # installed with the dev extras, beside this Python
    return subprocess.run(
        [str(exe), "--builtin-schema", "vendor.github-workflows", str(path)], capture_output=True, text=True
    )


def test_workflow_is_valid_by_githubs_schema():
    done = check_jsonschema(WORKFLOW)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_schema_check_can_fail(tmp_path):
    """A workflow without `runs-on` is refused: the check above is not vacuous."""
    broken = tmp_path / "ci.yml"
    broken.write_text(
        WORKFLOW.read_text(encoding="utf-8").replace("    runs-on: ubuntu-latest\n", ""), encoding="utf-8"
    )
    done = check_jsonschema(broken)
    assert done.returncode == 1 and "runs-on" in done.stdout + done.stderr


def test_workflow_runs_ci_on_python_311_with_a_pip_cache():
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    assert any(step.get("run") == "bash .ci/run" for step in steps)
    setup = next(step for step in steps if str(step.get("uses", "")).startswith("actions/setup-python@"))
    assert setup["with"]["python-version"] == "3.11" and setup["with"]["cache"] == "pip"
    assert all(job["runs-on"].startswith("ubuntu") for job in workflow["jobs"].values())
