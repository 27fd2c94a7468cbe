"""telemetry-bench: compile read-only telemetry into replayable agent benchmarks."""

__version__ = "0.1.0"
