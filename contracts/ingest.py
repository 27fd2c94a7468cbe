"""The ingest report: what was read, what became observations, what was rejected and why."""

from __future__ import annotations

from pydantic import Field

from contracts.base import Frozen


class FileAccount(Frozen):
    """Accounting for one raw value file."""

    source: str = Field(description="Path relative to the corpus folder.")
    raw_value_cells: int = Field(description="Records x value columns counted from the raw file.")
    observations: int = Field(description="Cells that became observations.")
    rejects: int = Field(description="Cells rejected, each with a reason.")


class MissingColumn(Frozen):
    """A point metadata refers to whose column is absent from its file (left out, not an error)."""

    source: str
    column: str
    point: str


class IngestReport(Frozen):
    """Summary of one corpus's ingest; observations + rejects == raw_value_cells always."""

    corpus: str
    sites: int
    streams: int
    observations: int
    rejects: int
    raw_value_cells: int
    rejects_by_reason: dict[str, int] = Field(description="Reason -> rejected cells.")
    rejects_by_stream: dict[str, dict[str, int]] = Field(description="Stream id -> reason -> rejected cells.")
    files: list[FileAccount]
    missing_columns: list[MissingColumn] = Field(description="Metadata points whose column no file has.")
    unmapped_columns: list[str] = Field(description="'file:column' value columns no metadata maps (cells rejected).")
    raw_sha256: dict[str, str] = Field(description="Every raw file (relative path) -> sha256.")
    metadata_sha256: dict[str, str] = Field(
        default={},
        description="Metadata kept beside the mapping (path relative to "
        "configs/corpora/<name>/) -> sha256; empty when the metadata is upstream.",
    )
    notes: list[str] = Field(description="Choices made among multiple metadata edges, and similar remarks.")
    rejected_members: list[dict[str, str]] = Field(
        default=[], description="Archive members refused unread or unreadable: source, member, reason, detail."
    )
    synthetic: bool = Field(False, description="The raw folder holds SYNTHETIC.md: generated data, not real telemetry.")
    duplicate_streams: list[list[str]] = Field(
        default=[],
        description="Groups of streams with identical content (the same "
        "timestamps and values, by digest): copies of one sensor. No task uses one as "
        "another's distractor.",
    )


class IngestConfig(Frozen):
    """configs/ingest.toml: what stops an ingest; it decides whether a build goes on, never what it writes."""

    reject_limits: dict[str, float] = Field(
        default={"bad_timestamp": 0.05},
        description="Reject reason -> the largest share of one file's raw value cells it may reject; above it the "
        "build stops naming the file (a mapping's [[cleaning.reject_limits]] overrides it, with a reason).",
    )
