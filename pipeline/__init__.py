"""telemetry-bench: compile read-only telemetry into replayable agent benchmarks."""

from pipeline.core.allocator import keep_freed_pages

keep_freed_pages()  # before anything imports polars

__version__ = "0.1.0"
