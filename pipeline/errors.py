"""The project's exceptions: one root, one subclass per stage. Messages say what, where and how to fix."""


class TelemetryBenchError(Exception):
    """Root of every error the CLI turns into a one-line message and exit status 1."""


class ConfigError(TelemetryBenchError):
    """A configuration file is missing, unreadable or invalid."""


class ChecksumError(TelemetryBenchError):
    """A raw file is missing or does not match its SHA256SUMS line."""


class IngestError(TelemetryBenchError):
    """Raw telemetry cannot be read as declared by its corpus mapping."""


class StageError(TelemetryBenchError):
    """A build stage cannot run (missing inputs, broken artifacts)."""
