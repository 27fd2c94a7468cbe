"""Every command's --help carries an Example:, and every example runs (exit 0) on the shipped corpora.

Each example runs in its own temporary folder: `/tmp/...` paths it names (as words, as KEY=/tmp/... values, or
inside a quoted command) are mapped into that folder, a relative `artifacts/...` path reads the session's freshly
built artifacts, and a relative `examples/...` path the shipped examples. A file that one example reads and
another example writes (`--out`) comes from a fixture that runs the writing example in a folder of its own,
never from a file an earlier test left behind.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.helpers import REPO

FIXED = "/tmp/"  # the prefix of the fixed paths examples name for readers to copy
FIXED_PATH = re.compile(r"(?<![\w/.])/tmp/[^\s'\"]+")  # one anywhere in a word: alone, after KEY=, inside a command


def commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    found = []
    for name, command in sorted(group.commands.items()):
        path = (*prefix, name)
        if isinstance(command, click.Group):
            found += commands(command, path)
        else:
            found.append((path, command))
    return found


def examples(command: click.Command) -> list[str]:
    text = command.help or ""
    lines = text.split("Example:", 1)[1].splitlines() if "Example:" in text else []
    return [line.strip() for line in lines if line.strip().startswith("telemetry-bench ")]


ALL = commands(main)
EXAMPLES = [e for _, c in ALL for e in examples(c)] + examples(main)


def written(example: str) -> set[str]:
    """The fixed paths an example writes (the value of each --out, and the folder of each --cache-dir)."""
    words = shlex.split(example)
    return {
        value
        for flag, value in zip(words, words[1:], strict=False)
        if flag in ("--out", "--cache-dir") and value.startswith(FIXED)
    }


def read(example: str) -> set[str]:
    """The fixed paths an example names but does not write: its inputs."""
    return {path for word in shlex.split(example) for path in FIXED_PATH.findall(word)} - written(example)


PRODUCERS = {path: example for example in EXAMPLES for path in written(example)}


def localized(example: str, folder: Path, artifacts: Path) -> list[str]:
    """The example's arguments with every fixed path mapped into `folder`, on the session's artifacts."""
    words = [
        FIXED_PATH.sub(lambda m: str(folder / m.group(0)[len(FIXED) :]), word) for word in shlex.split(example)[1:]
    ]
    return ["--root", str(REPO), "--artifacts", str(artifacts), *words]


def run_example(example: str, folder: Path, artifacts: Path) -> tuple[int, str]:
    """Run one example with `folder` as the current directory (relative artifacts/ paths read the built ones)."""
    for name, target in (("artifacts", artifacts), ("examples", REPO / "examples")):
        link = folder / name
        if not link.exists():
            link.symlink_to(target, target_is_directory=True)
    args = localized(example, folder, artifacts)
    if "serve" in args:  # a stdio server: run it for real, with stdin closed so it ends
        exe = Path(sys.executable).with_name("telemetry-bench")
        done = subprocess.run([str(exe), *args], stdin=subprocess.DEVNULL, capture_output=True, timeout=60, cwd=folder)
        return done.returncode, done.stderr.decode()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        result = CliRunner().invoke(main, args)
    return result.exit_code, result.output


@pytest.fixture(scope="session")
def produced(real_artifacts, tmp_path_factory):
    """The file a writing example produces, made once per session in a folder of its own."""
    made: dict[str, Path] = {}

    def get(path: str) -> Path:
        if path not in made:
            example = PRODUCERS.get(path)
            assert example, f"an example reads {path}, which no example writes: name a shipped file instead"
            folder = tmp_path_factory.mktemp("example-producer")
            code, output = run_example(example, folder, real_artifacts)
            assert code == 0, f"{example}: {output}"
            made[path] = folder / path[len(FIXED) :]
        return made[path]

    return get


@pytest.mark.parametrize(("path", "command"), ALL, ids=[" ".join(p) for p, _ in ALL])
def test_every_command_has_an_example(path, command):
    assert examples(command), f"{' '.join(path)} --help has no Example:"


@pytest.mark.parametrize("example", EXAMPLES)
def test_examples_run(example, real_artifacts, produced, tmp_path):
    for path in sorted(read(example)):
        target = tmp_path / path[len(FIXED) :]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(produced(path), target)
    code, output = run_example(example, tmp_path, real_artifacts)
    assert code == 0, f"{example}: {output}"


def test_examples_name_no_input_only_a_leftover_could_supply():
    """Every fixed path an example reads is written by some example (else it passes only on a used machine)."""
    orphans = {path for example in EXAMPLES for path in read(example)} - set(PRODUCERS)
    assert not orphans, f"examples read {sorted(orphans)}, which no example writes"
