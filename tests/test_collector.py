"""The cyclic collector's thresholds (pipeline/core/allocator.py): a command and a worker run with GC_THRESHOLDS; a
program that only imports the command line keeps its own."""

from __future__ import annotations

import ast
import subprocess
import sys

from pipeline.core.allocator import GC_THRESHOLDS
from tests.helpers import REPO

SHOW = "import gc, json; print(json.dumps(gc.get_threshold()))"


def _thresholds(code: str) -> tuple[int, ...]:
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return tuple(ast.literal_eval(done.stdout.strip().splitlines()[-1]))


def test_importing_the_command_line_leaves_the_collector_as_it_was():
    assert _thresholds(f"import gc; gc.set_threshold(700, 10, 10); import pipeline.cli; {SHOW}") == (700, 10, 10)


def test_a_command_runs_with_the_collectors_thresholds():
    run = "from pipeline.cli import main; main(['inspect', '--help'], standalone_mode=False)"
    assert _thresholds(f"{run}; {SHOW}") == GC_THRESHOLDS


def test_a_spawned_worker_runs_with_the_collectors_thresholds():
    start = "from pipeline.core.executor import start_worker; start_worker('1')"
    assert _thresholds(f"{start}; {SHOW}") == GC_THRESHOLDS
