"""The manifest every stage writes: what produced its outputs, and their hashes."""

from __future__ import annotations

from pydantic import Field

from contracts.base import Frozen


class OutputFile(Frozen):
    """One output file: content hash and size."""

    xxh3: str = Field(description="xxh3-128 of the file's bytes.")
    bytes: int


class StageManifest(Frozen):
    """Identity of one stage's outputs. Nothing here depends on time, host, path or thread count."""

    scheme_version: int = Field(description="Version of the hashing scheme (pipeline.core.canonical).")
    corpus: str
    stage: str
    code_version: str = Field(description="xxh3-128 over the source files the stage runs (not a git id).")
    contract_hash: str = Field(description="xxh3-128 of the JSON Schemas of the stage's contracts.")
    config_hash: str = Field(description="xxh3-128 of the stage's slice of configuration.")
    libraries: dict[str, str] = Field(description="Versions of the libraries that shape output bytes.")
    inputs: dict[str, str] = Field(description="Input name -> content hash.")
    outputs: dict[str, OutputFile] = Field(description="Deterministic output files (relative name -> hash).")
    row_counts: dict[str, int] = Field(description="Table -> rows.")
    logical_digests: dict[str, str] = Field(default={}, description="Table -> logical xxh3-128 digest of its content.")
    cache_key: str = Field(description="xxh3-128 over everything above except outputs, counts and digests.")
    details: dict = Field(default={}, description="Stage-specific facts (e.g. thresholds), hashed with the outputs.")
