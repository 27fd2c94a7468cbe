"""The README runs as written: every `.venv/bin/telemetry-bench` line of its "First hour" section, in order, in one
folder (a line ending in `# needs a model endpoint` is checked for its options only); every such line of its later
sections on the shipped project; and every `make` target it names exists in the Makefile. (The command table's
lines have placeholders; each command's own examples run in tests/test_cli_examples.py.)

`/tmp/...` paths are mapped into the test's folder; `artifacts/...` reads the session's freshly built artifacts; a
command that writes into the project (`corpus draft`) writes into a project of the test's own, whose data/raw holds
copies of the shipped raw folders it names.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

from click.testing import CliRunner

from pipeline.cli import main
from tests.helpers import REPO, copy_shared_configs

README = (REPO / "README.md").read_text(encoding="utf-8")
PROGRAM = ".venv/bin/telemetry-bench"
NEEDS_ENDPOINT = "# needs a model endpoint"


def first_screen() -> str:
    """The README up to the command table: the two commands and the three first-hour paths."""
    return README.split("## What works today", 1)[0]


def command_lines(text: str) -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip().startswith(PROGRAM)]


def localized(line: str, folder: Path) -> list[str]:
    words = shlex.split(line.split(" #", 1)[0])[1:]
    return [re.sub(r"^/tmp/", f"{folder}/", word) for word in words]


def test_the_first_screen_names_the_three_paths_and_runs_them(tmp_path, real_artifacts, monkeypatch):
    lines = command_lines(first_screen())
    assert any(" run --release " in line for line in lines)  # play and score without building
    assert any(" corpus draft " in line for line in lines)  # add a corpus
    assert any(" verify --release " in line for line in lines)  # verify a release
    root = tmp_path / "project"
    (root / "configs" / "corpora").mkdir(parents=True)
    copy_shared_configs(root)
    for raw in re.findall(r" corpus draft data/raw/(\w+)", first_screen()):
        shutil.copytree(REPO / "data" / "raw" / raw, root / "data" / "raw" / raw)
    runner = CliRunner()
    here = tmp_path / "cwd"
    here.mkdir()
    (here / "artifacts").symlink_to(real_artifacts)
    (here / "data").symlink_to(root / "data")
    monkeypatch.chdir(here)
    for line in lines:
        words = localized(line, tmp_path)
        if line.endswith(NEEDS_ENDPOINT):
            # not played here: its options must exist (the fake-provider tests play the openai agent)
            result = runner.invoke(main, ["--root", str(root), *words[:1], "--help"])
            assert result.exit_code == 0, result.output
            flags = {w.split("=", 1)[0] for w in words if w.startswith("--")}
            assert all(flag in result.output for flag in flags), (line, result.output)
            continue
        result = runner.invoke(main, ["--root", str(root), *words])
        assert result.exit_code == 0, (line, result.output)
        if " score " in line:
            assert "accomplished 1.0000" in result.output  # the oracle, as the README says
    assert (root / "configs" / "corpora" / "mine.toml").exists()


def test_every_make_target_the_first_screen_names_exists():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, flags=re.M))
    named = set(re.findall(r"`make ([a-z][a-z-]*)`", first_screen())) | set(
        re.findall(r"^make ([a-z][a-z-]*)", first_screen(), flags=re.M)
    )
    assert {"build", "test", "shell", "verify", "system-deps"} <= named
    assert named <= targets, named - targets


def test_the_readme_links_only_files_in_the_clone():
    for path in re.findall(r"\b((?:docs|contracts|configs|examples)/[\w./-]+\.(?:md|json|toml))", README):
        assert (REPO / path).exists(), path
    assert "../shared" not in README


def test_the_commands_after_the_first_screen_run_as_written(real_artifacts):
    """The README's later examples run on the shipped project and the session's artifacts (a build there is cached)."""
    rest = README.split("## What works today", 1)[1]
    lines = command_lines(rest)
    assert lines
    for line in lines:
        result = CliRunner().invoke(
            main, ["--root", str(REPO), "--artifacts", str(real_artifacts), *localized(line, REPO)]
        )
        assert result.exit_code == 0, (line, result.output)
