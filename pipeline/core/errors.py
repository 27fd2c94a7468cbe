"""The project's exceptions: one root, one subclass per stage. Messages say what, where and how to fix."""

from __future__ import annotations

import errno
import pickle
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class TelemetryBenchError(Exception):
    """Root of every error the CLI turns into a one-line message and exit status 1."""


class ConfigError(TelemetryBenchError):
    """A configuration file is missing, unreadable or invalid."""


class UnknownCorpusError(ConfigError):
    """A corpus name without a mapping. The message lists the known corpora, or, outside a project, says how to
    point at one; `for_command` adds `--release DIR` for commands that take it (the CLI's handler knows)."""

    def __init__(self, unknown: list[str], known: list[str], mappings_dir: Path) -> None:
        self.unknown, self.known, self.mappings_dir = unknown, known, mappings_dir
        super().__init__(self.for_command(takes_release=False))

    def for_command(self, takes_release: bool) -> str:
        names = ", ".join(self.unknown)
        if self.known:
            known = ", ".join(self.known)
            return f"unknown corpus {names}: known are {known} (a corpus needs {self.mappings_dir}/<name>.toml)"
        where = "--root PROJECT (a telemetry-bench checkout, or TELEMETRY_BENCH_ROOT)"
        if takes_release:
            where += " or --release DIR (a release folder)"
        return f"unknown corpus {names}: no corpus known here (no {self.mappings_dir}/*.toml); give {where}"


class ChecksumError(TelemetryBenchError):
    """A raw file is missing, does not match its SHA256SUMS line, or is a link to outside its corpus folder."""


class IngestError(TelemetryBenchError):
    """Raw telemetry cannot be read as declared by its corpus mapping."""


class StageError(TelemetryBenchError):
    """A build stage cannot run (missing inputs, broken artifacts)."""


class OpenAIAgentError(TelemetryBenchError):
    """The endpoint cannot be used (no key, not reachable after retries)."""


class PluginError(TelemetryBenchError):
    """An agent plugin cannot be loaded or started (the message says which and how to fix it)."""


class FatalAgentError(TelemetryBenchError):
    """The agent cannot play at all (a refused API key, an unknown model): the run stops with this one-line message."""


class EvaluationError(TelemetryBenchError):
    """Agent traces cannot be evaluated against ground truth (unreadable files, trajectories that do not match)."""


class GymError(TelemetryBenchError):
    """The environment is used out of order (step before reset, after done) or asked for an unknown episode."""


class RunError(TelemetryBenchError):
    """A run or a score cannot start (unknown agent or split, trace and episodes that do not belong together)."""


class ReportError(StageError):
    """The report cannot be made from what was asked (a corpus not built, a trace of another corpus)."""


class ReleaseError(TelemetryBenchError):
    """A release folder cannot be played (missing files, digests that do not match, an unwritable cache)."""


class DiskFull(TelemetryBenchError):
    """A write refused for want of space: one line naming where, and nothing torn left behind (the writers remove or
    cut back what they had begun)."""


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
DISK_FULL_TEXTS = ("no space left on device", "disk quota exceeded")  # DuckDB's IOException carries no errno


def disk_full(exc: BaseException, path: Path | str) -> DiskFull | None:
    """The DiskFull line for an error that is a write refused for want of space (ENOSPC, EDQUOT: an OSError of
    Python's or pyarrow's, or an error whose text says so), naming `path`; None for any other error. The one place
    that tells a full disk: every writer that can meet one asks it."""
    if isinstance(exc, DiskFull):
        return exc
    if isinstance(exc, TelemetryBenchError):  # its message may quote anything (a raw cell), that text included
        return None
    said = isinstance(exc, OSError) and exc.errno in DISK_FULL
    if not (said or any(text in str(exc).lower() for text in DISK_FULL_TEXTS)):
        return None
    return DiskFull(f"{path}: disk full (no space left on device); free space there or write elsewhere")


class MissingExtra(TelemetryBenchError, ImportError):
    """An optional feature whose library is not installed: the message names the extra that installs it (an
    ImportError too, for callers that try an import)."""


# Signals raised and caught inside one layer: they never reach the CLI's handler (each is turned into a typed result,
# an agent_error turn, a rejected row or one of the errors above where it is caught).


class AgentFailure(Exception):
    """The agent itself failed (its process crashed or stayed silent past the turn timeout): the runner records an
    agent_error turn with this message and ends the episode."""


class RenderError(ValueError):
    """A template or call names a slot the candidate does not have."""


class GoldError(ValueError):
    """A call set that does not yield a gold answer (a tool error, or a missing or unmapped value)."""


class UnsafePickle(pickle.UnpicklingError):
    """A pickle that asks for something other than numpy arrays (e.g. os.system through __reduce__)."""


class LiftError(ValueError):
    """A task that cannot be lifted (e.g. its withheld slot would still show in the first message)."""


class ToolFailure(Exception):
    """A tool refuses its arguments: the tool layer returns it as a typed ToolError result (code, message, argument)."""

    def __init__(self, code: str, message: str, argument: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.argument = code, message, argument


class TimestampError(ValueError):
    """A timestamp argument that cannot be read (the code names why, for the ToolError it becomes)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class ReferenceError_(ValueError):
    """A reference that names no earlier output, or a path that output does not have."""

    def __init__(self, message: str, argument: str) -> None:
        super().__init__(message)
        self.argument = argument


MOST_PROBLEMS = 3  # problems of one validation error a message names; the rest are counted
# Characters of a field's path and of a problem's text in it: both may quote the input (a key, a value), which may be
# huge; a project validator's message says the fix and is kept whole up to the longer limit.
FIELD_WIDTH, PROBLEM_WIDTH = 80, 300


def clipped(text: str, width: int = PROBLEM_WIDTH) -> str:
    """Text for a one-line message: its whitespace runs as one space, cut to `width` characters."""
    text = " ".join(text.split())  # one line whatever the input held
    return text if len(text) <= width else text[: width - 3] + "..."


def shown(value: object, width: int = 60) -> str:
    """A value from outside as a message quotes it: its repr cut to `width` characters (it may be huge), a JSON
    object or array by its kind alone (its repr may nest deeply)."""
    text = f"a JSON {type(value).__name__}" if isinstance(value, dict | list) else repr(value)
    return text if len(text) <= width else f"{text[: width - 3]}..."


def validation_problems(exc: ValidationError, missing: str = "required, missing") -> str:
    """A pydantic ValidationError as one line: `field: problem` for the first few problems (the field a dotted path,
    `(top level)` for the whole value; `missing` says what a missing field needs), and how many more. Pydantic's own
    text spans lines and quotes the input; a message of the project's is one line (the CLI prints it after `error:`)."""
    problems = []
    errors = exc.errors(include_url=False, include_input=False)
    for err in errors[:MOST_PROBLEMS]:
        where = clipped(".".join(str(part) for part in err["loc"]), FIELD_WIDTH) or "(top level)"
        what = missing.format(name=err["loc"][-1] if err["loc"] else "") if err["type"] == "missing" else err["msg"]
        problems.append(f"{where}: {clipped(what, PROBLEM_WIDTH)}")
    more = len(errors) - MOST_PROBLEMS
    return "; ".join(problems) + (f"; and {more} more" if more > 0 else "")
