"""The project's exceptions: one root, one subclass per stage. Messages say what, where and how to fix."""

import pickle
from pathlib import Path


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
    """A raw file is missing or does not match its SHA256SUMS line."""


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
