"""The one canonical JSON writer and the identity hashes (xxh3-128) used by every artifact."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import xxhash

# Bump when the hashing or serialization scheme changes: every digest depends on it.
HASH_SCHEME_VERSION = 1


def _check_floats(value: Any, where: str = "$") -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"non-finite float at {where}: canonical JSON has no NaN or infinity")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_floats(item, f"{where}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_floats(item, f"{where}[{index}]")


def canonical_json(value: Any) -> str:
    """Sorted keys, compact separators, UTF-8 text, no NaN: the same bytes for the same value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_bytes(value: Any) -> bytes:
    return canonical_json(value).encode("utf-8")


def pretty_json(value: Any) -> str:
    """Indented but otherwise canonical JSON, for files people read (manifests, reports)."""
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


MAX_JSON_DEPTH = 64  # how deeply untrusted JSON (tool arguments, MCP messages) may nest; tools take flat objects


class JSONTooDeep(json.JSONDecodeError):
    """Untrusted JSON nested deeper than MAX_JSON_DEPTH (or than the parser's recursion allows): a JSONDecodeError, so
    that every reader that refuses bad JSON refuses this too."""

    def __init__(self, max_depth: int, text: str | bytes) -> None:
        doc = text if isinstance(text, str) else text[:200].decode("utf-8", "replace")
        super().__init__(f"nested deeper than {max_depth} levels", doc, 0)


def json_depth(value: Any) -> int:
    """How deeply a parsed JSON value nests (a scalar is 0, [] and {} are 1); iterative, so any depth is measured."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest


def loads_untrusted(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """json.loads for input from outside (agents, MCP clients, users): JSONTooDeep beyond max_depth levels instead of a
    RecursionError; other bad input is json.JSONDecodeError (UnicodeDecodeError for bytes), both ValueErrors."""
    try:
        value = json.loads(text)
    except RecursionError as exc:
        raise JSONTooDeep(max_depth, text) from exc
    if json_depth(value) > max_depth:
        raise JSONTooDeep(max_depth, text)
    return value


def check_text(text: str, what: str) -> str:
    """`text` itself if it is valid Unicode (encodable as UTF-8); else a ValueError naming `what` and the first bad
    character. Text from a file (a pickled string, an archive member's name, a file name) is checked where it enters:
    a lone surrogate would otherwise fail later, far from its source, when a table or JSON is written."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{what} {text[:80]!r} is not valid Unicode (character {exc.start}: {text[exc.start : exc.end]!r})"
        ) from None
    return text


def digest(data: bytes | str) -> str:
    """xxh3-128 hex digest of bytes (str is UTF-8 encoded)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return xxhash.xxh3_128_hexdigest(data)


def digest_value(value: Any) -> str:
    """Digest of a JSON-able value through its canonical form."""
    return digest(canonical_bytes(value))


def digest_file(path: Path, chunk: int = 1 << 22) -> str:
    hasher = xxhash.xxh3_128()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            hasher.update(block)
    return hasher.hexdigest()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; outputs are meant to be shared and committed
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, value: Any, *, pretty: bool = True) -> None:
    _check_floats(value)
    text = pretty_json(value) if pretty else canonical_json(value) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def write_jsonl(path: Path, rows: list[Any]) -> None:
    for row in rows:
        _check_floats(row)
    atomic_write_bytes(path, b"".join(canonical_bytes(row) + b"\n" for row in rows))
