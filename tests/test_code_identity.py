"""Code identity by import closure: which files a stage's code version covers."""

from __future__ import annotations

from pathlib import Path

from pipeline.core.code_identity import import_closure
from pipeline.core.manifest import code_version
from pipeline.harness.build import STAGES
from tests.helpers import REPO


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def names(root: Path, entries: list[str]) -> list[str]:
    return [p.relative_to(root).as_posix() for p in import_closure(entries, root)]


def test_closure_follows_every_kind_of_import_and_the_packages_on_the_way(tmp_path):
    write(
        tmp_path,
        {
            "pipeline/__init__.py": "",
            "pipeline/a/__init__.py": "",
            "pipeline/a/entry.py": "import json\nfrom pipeline.b import helper\nfrom . import sibling\n\ndef run():\n"
            "    from pipeline.c.late import f  # a function-level import runs with the stage\n",
            "pipeline/a/sibling.py": "from .deep.leaf import x\n",
            "pipeline/a/deep/__init__.py": "",
            "pipeline/a/deep/leaf.py": "x = 1\n",
            "pipeline/b/__init__.py": "",
            "pipeline/b/helper.py": "from contracts.model import M\n",
            "pipeline/c/__init__.py": "",
            "pipeline/c/late.py": "DATA_FILES = ('contracts/schemas/s.json',)\n",
            "pipeline/unused.py": "",
            "contracts/__init__.py": "",
            "contracts/model.py": "",
            "contracts/schemas/s.json": "{}",
        },
    )
    assert names(tmp_path, ["pipeline.a.entry"]) == [
        "contracts/__init__.py",
        "contracts/model.py",
        "contracts/schemas/s.json",
        "pipeline/__init__.py",
        "pipeline/a/__init__.py",
        "pipeline/a/deep/__init__.py",
        "pipeline/a/deep/leaf.py",
        "pipeline/a/entry.py",
        "pipeline/a/sibling.py",
        "pipeline/b/__init__.py",
        "pipeline/b/helper.py",
        "pipeline/c/__init__.py",
        "pipeline/c/late.py",
    ]


def test_stages_cover_what_they_import_and_nothing_they_do_not():
    closures = {s.name: {p.relative_to(REPO).as_posix() for p in import_closure(s.entries)} for s in STAGES}
    writer, builder = "pipeline/ingest/parquet.py", "pipeline/store/build.py"
    assert writer in closures["ingest"] and writer in closures["store"] and builder in closures["store"]
    for stage in ("tasks", "episodes", "audit", "release"):
        assert writer not in closures[stage] and builder not in closures[stage], stage
        assert "pipeline/store/reader.py" in closures[stage], stage
    assert "pipeline/audit/stage.py" in closures["audit"] and "pipeline/audit/stage.py" not in closures["tasks"]
    assert "pipeline/harness/build.py" not in set().union(*closures.values())  # orchestration is not a stage's code


def test_declared_data_files_exist_and_enter_the_version():
    for path in import_closure(["pipeline.release.gt_validate"]):
        assert path.is_file(), path
    assert "contracts/schemas/ground_truth_trajectory.schema.json" in {
        p.relative_to(REPO).as_posix() for p in import_closure(["pipeline.release.gt_validate"])
    }
    assert code_version(["pipeline.release.gt_validate"]) != code_version(["pipeline.release.ground_truth"])
