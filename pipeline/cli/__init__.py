"""The `telemetry-bench` command line: each command parses options and calls one library function."""

from __future__ import annotations

import atexit
import gc

import click

from pipeline import __version__
from pipeline.cli import build, groundtruth, ingest, inspect, report, runtime, tools
from pipeline.core.allocator import collect_less


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="telemetry-bench")
@click.option(
    "--root",
    type=click.Path(file_okay=False),
    help="Project root (default: $TELEMETRY_BENCH_ROOT or the current folder).",
)
@click.option("--artifacts", type=click.Path(file_okay=False), help="Artifacts folder (default: <root>/artifacts).")
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
def main(root: str | None, artifacts: str | None, debug: bool) -> None:
    """Compile read-only telemetry into deterministic, replayable agent benchmarks.

    \b
    Example:
      telemetry-bench ingest --corpus xai4heat
      telemetry-bench inspect ingest --corpus xai4heat --json
    """
    collect_less()  # a command's collector thresholds (pipeline/core/allocator.py): set when a command runs


# On leaving, the interpreter's last collection walks every object the imports made (0.3-0.4 s of each process's exit
# on a 2-core machine, measured on `build --until store`). Registered first, this runs after every other exit handler,
# when the command has written and closed all it writes: what is left is given back with the process.
atexit.register(gc.freeze)

for _command in (
    *build.COMMANDS,
    *ingest.COMMANDS,
    inspect.inspect,
    *tools.COMMANDS,
    *runtime.COMMANDS,
    *groundtruth.COMMANDS,
    *report.COMMANDS,
):
    main.add_command(_command)
