"""What a value file's path says: the groups of values.file_pattern, and the order shards of one stream go in."""

from __future__ import annotations

import re
from pathlib import Path

from pipeline.core import patterns
from pipeline.core.errors import IngestError


def file_groups(rel: str, pattern: str) -> dict[str, str]:
    """The named groups of file_pattern, matched against the file name, or the relative path when it holds a '/'."""
    by_path = "/" in pattern
    match = patterns.fullmatch(pattern, rel if by_path else Path(rel).name, "values.file_pattern")
    if not match:
        raise IngestError(
            f"{rel}: {'relative path' if by_path else 'file name'} does not match values.file_pattern {pattern!r}; "
            "rename it or fix the pattern"
        )
    return {k: v for k, v in match.groupdict().items() if v is not None}


def natural_key(rel: str) -> tuple:
    """Sort key of a path with its numbers compared as numbers (part_2 before part_10), ties by the text."""
    pieces = re.split(r"(\d+)", rel)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(pieces)), rel
