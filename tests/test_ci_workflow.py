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


def _ci_calls(tmp_path: Path, fuzz: str) -> list[str]:
    """The make calls .ci/run makes, with a `make` that only records them (run from a copy of .ci/run)."""
    (tmp_path / ".ci").mkdir(parents=True)
    (tmp_path / ".ci" / "run").write_bytes((REPO / ".ci" / "run").read_bytes())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    (bin_dir / "make").write_text(f'#!/bin/sh\necho "make $*" >> {log}\n')
    (bin_dir / "make").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "TELEMETRY_BENCH_CI_FUZZ": fuzz}
    subprocess.run(["bash", str(tmp_path / ".ci" / "run")], env=env, check=True, cwd=tmp_path)
    return log.read_text().splitlines()


def test_ci_runs_verify_the_suite_twice_and_make_fuzz_on_its_schedule(tmp_path):
    """Every run: make verify, then the suite in file order and in a random order; make fuzz when asked (the
    workflow's weekly schedule, Sundays), never when told not to."""
    every_run = ["make verify", "make test PYTEST_ARGS=-p no:randomly", "make test"]
    assert _ci_calls(tmp_path / "asked", "1") == [*every_run, "make fuzz"]
    assert _ci_calls(tmp_path / "never", "0") == every_run
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    [cron] = [entry["cron"] for entry in workflow[True]["schedule"]]  # PyYAML reads the key `on` as True
    assert cron.split()[4] == "0"  # Sundays, when .ci/run adds make fuzz
