"""The one canonical JSON writer and the identity hashes (xxh3-128) used by every artifact."""

from __future__ import annotations

import json
import math
import os
import re
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
    return _walk(value)[0]


class NotUnicode(json.JSONDecodeError):
    """Untrusted JSON whose text holds a lone surrogate (`"\\ud800"`): JSON allows the escape, but no UTF-8 text holds
    the character, so every writer after would fail on it. A JSONDecodeError, like every other bad JSON."""

    def __init__(self, text: str | bytes) -> None:
        doc = text if isinstance(text, str) else text[:200].decode("utf-8", "replace")
        super().__init__("a string holds a lone surrogate (\\ud800-\\udfff): not valid Unicode", doc, 0)

    def __str__(self) -> str:  # where in the text does not matter (the value holds the string, not its position)
        return self.msg


SURROGATE = re.compile("[\ud800-\udfff]")


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def loads_untrusted(text: str | bytes, max_depth: int = MAX_JSON_DEPTH, allow_nan: bool = True) -> Any:
    """json.loads for input from outside (agents, MCP clients, users, files): JSONTooDeep beyond max_depth levels
    instead of a RecursionError, NotUnicode for a string or key with a lone surrogate; with allow_nan=False, NaN and
    Infinity (not JSON, though Python writes them) are refused too. Other bad input is json.JSONDecodeError
    (UnicodeDecodeError for bytes): all are ValueErrors."""
    try:
        value = json.loads(text, parse_constant=None if allow_nan else _refuse_constant)
    except RecursionError as exc:
        raise JSONTooDeep(max_depth, text) from exc
    deepest, lone = _walk(value)
    if deepest > max_depth:
        raise JSONTooDeep(max_depth, text)
    if lone:
        raise NotUnicode(text)
    return value


def _walk(value: Any) -> tuple[int, bool]:
    """How deeply a parsed JSON value nests, and whether a string or key in it holds a lone surrogate (one pass)."""
    deepest, lone, stack = 0, False, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str):
            lone = lone or SURROGATE.search(item) is not None
        elif isinstance(item, dict):
            deepest = max(deepest, level)
            lone = lone or any(SURROGATE.search(key) for key in item)
            stack.extend((child, level + 1) for child in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in item)
    return deepest, lone


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
