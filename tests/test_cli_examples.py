"""Every command's --help carries an Example:, and every example runs (exit 0) on the shipped corpora."""

from __future__ import annotations

import shlex

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


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("artifacts")
    result = CliRunner().invoke(main, ["--root", str(REPO), "--artifacts", str(folder), "build"])
    assert result.exit_code == 0, result.output
    return folder


@pytest.mark.parametrize("example", [e for _, c in ALL for e in examples(c)] + [e for e in examples(main)])
def test_examples_run(example, artifacts):
    args = shlex.split(example)[1:]
    result = CliRunner().invoke(main, ["--root", str(REPO), "--artifacts", str(artifacts), *args])
    assert result.exit_code == 0, f"{example}: {result.output}"
