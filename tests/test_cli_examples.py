"""Every command's --help carries an Example:, and every example runs (exit 0) on the shipped corpora."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.helpers import REPO


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


@pytest.mark.parametrize(("path", "command"), ALL, ids=[" ".join(p) for p, _ in ALL])
def test_every_command_has_an_example(path, command):
    assert examples(command), f"{' '.join(path)} --help has no Example:"


@pytest.fixture
def artifacts(real_artifacts):
    return real_artifacts


@pytest.mark.parametrize("example", [e for _, c in ALL for e in examples(c)] + [e for e in examples(main)])
def test_examples_run(example, artifacts):
    args = ["--root", str(REPO), "--artifacts", str(artifacts), *shlex.split(example)[1:]]
    if "serve" in args:  # a stdio server: run it for real, with stdin closed so it ends
        exe = Path(sys.executable).with_name("telemetry-bench")
        done = subprocess.run([str(exe), *args], stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr.decode()
        return
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, f"{example}: {result.output}"
