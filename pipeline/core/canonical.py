"""The one canonical JSON writer and the identity hashes (xxh3-128) used by every artifact."""

from __future__ import annotations

import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import xxhash

from pipeline.core.errors import disk_full

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
    """How deeply a parsed JSON value nests (a scalar is 0, [] and {} are 1); iterative, so any depth is measured.
    Level by level, each level's containers in one list (half the time of a stack of (value, level) pairs: every
    untrusted row read, a release's when it is verified, goes through here)."""
    deepest, level = 0, [value]
    while True:
        containers = [item for item in level if isinstance(item, (dict, list, tuple))]
        if not containers:
            return deepest
        deepest += 1
        level = [child for item in containers for child in (item.values() if isinstance(item, dict) else item)]


class JSONValueError(json.JSONDecodeError):
    """Untrusted JSON that parses but holds what no artifact may: a string that is not Unicode text (a lone surrogate,
    from a \\ud800 escape or from bytes that are not UTF-8), a number that is not finite (NaN, Infinity, 1e999) or an
    integer longer than Python reads. A JSONDecodeError, so that every reader that refuses bad JSON refuses this too;
    `value` is what was parsed when the text itself was JSON (a server still reads a request's id from it)."""

    def __init__(self, message: str, text: str | bytes, position: int = 0, value: Any = None) -> None:
        doc = text if isinstance(text, str) else text[:200].decode("utf-8", "replace")
        super().__init__(message, doc, min(position, len(doc)))
        self.value = value


# Where a lone surrogate may hide in JSON text: as itself (text decoded with surrogateescape), as a \uD800-\uDFFF
# escape, or as its UTF-8-like bytes (which json.loads decodes with surrogatepass). Valid pairs match too, and then the
# parsed strings show nothing wrong.
_SURROGATE_TEXT = re.compile(r"[\ud800-\udfff]|\\u[dD][89a-fA-F]")
_SURROGATE_BYTES = re.compile(rb"\xed[\xa0-\xbf]|\\u[dD][89a-fA-F]")


def _escaped(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def not_unicode(value: Any) -> str | None:
    """Where a JSON-like value (dicts, lists, strings; keys too) holds a string that is not Unicode text, a lone
    surrogate no UTF-8 writer can write, as '$.a[0]: lone surrogate \\ud800 (not Unicode text)'; None when there is
    none. Iterative, so any depth is walked."""
    stack: list[tuple[Any, str]] = [(value, "$")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                return f"{where}: lone surrogate {_escaped(item[exc.start])} (not Unicode text)"
        elif isinstance(item, dict):
            for key, child in item.items():
                name = _escaped(key) if isinstance(key, str) else key
                stack += [(key, f"{where} key {name}"), (child, f"{where}.{name}")]
        elif isinstance(item, (list, tuple)):
            stack.extend((child, f"{where}[{index}]") for index, child in enumerate(item))
    return None


def printable(value: Any) -> Any:
    """A JSON-like value with every string that is not Unicode text written with backslash escapes (\\ud800 as six
    characters), so that what an agent sent can be recorded as it came, in UTF-8. Iterative, so any depth is copied."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        item, parent, slot = stack.pop()
        if isinstance(item, str):
            parent[slot] = _escaped(item)
        elif isinstance(item, dict):
            parent[slot] = copy = {}
            for key, child in item.items():
                name = _escaped(key) if isinstance(key, str) else key
                copy[name] = None
                stack.append((child, copy, name))
        elif isinstance(item, (list, tuple)):
            parent[slot] = copy = [None] * len(item)
            stack.extend((child, copy, index) for index, child in enumerate(item))
        else:
            parent[slot] = item
    return root[0]


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"the number {text[:40]} is out of range (not finite)")
    return number


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def loads_untrusted(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """json.loads for input from outside (agents, models, MCP clients, users), checked where it enters: JSONTooDeep
    beyond max_depth levels instead of a RecursionError, JSONValueError for strings that are not Unicode text and
    numbers no JSON writer writes back; other bad input is json.JSONDecodeError (UnicodeDecodeError for bytes that are
    not UTF-8), all ValueErrors."""
    try:
        value = json.loads(text, parse_float=_finite, parse_constant=_constant)
    except RecursionError as exc:
        raise JSONTooDeep(max_depth, text) from exc
    except json.JSONDecodeError:
        raise
    except UnicodeDecodeError:
        raise
    except ValueError as exc:  # a number out of range, NaN or Infinity, an integer of more digits than Python reads
        raise JSONValueError(str(exc).split(";")[0], text) from exc
    if json_depth(value) > max_depth:
        raise JSONTooDeep(max_depth, text)
    suspect = (_SURROGATE_TEXT if isinstance(text, str) else _SURROGATE_BYTES).search(text)
    if suspect is not None and (problem := not_unicode(value)) is not None:
        raise JSONValueError(problem, text, suspect.start(), value)
    return value


MAX_ROW_BYTES = 4 << 20  # one row of a JSON-lines file a build writes (an episode, a trajectory) is some kilobytes


class TooLarge(ValueError):
    """A file or a row larger than its readers accept: refused before it is held in memory."""


def read_bounded(path: Path, limit: int) -> bytes:
    """A file's bytes, if it has at most `limit` of them (TooLarge otherwise): a reader of files from outside (a
    release's manifests, a dataset card) never holds more than that."""
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"larger than {limit} bytes, more than a build writes")
    return data


def iter_rows(handle: BinaryIO, limit: int = MAX_ROW_BYTES) -> Iterator[bytes]:
    """The rows of a JSON-lines file, one at a time, as a release counts and digests them (pipeline.release.stage):
    each line without its newline; a last line without one is a row too, and an empty file is one empty row. A row
    longer than `limit` bytes is TooLarge (its number in the message), before it is held in memory."""
    number = 0
    while True:
        line = handle.readline(limit + 1)
        number += 1
        if line.endswith(b"\n"):
            yield line[:-1]
        elif len(line) > limit:
            raise TooLarge(f"row {number} is longer than {limit} bytes, more than a build writes")
        else:
            if line or number == 1:
                yield line
            return


def check_text(text: str, what: str) -> str:
    """`text` itself if it is valid Unicode (encodable as UTF-8); else a ValueError naming `what` and the first bad
    character (not_unicode). Text from a file (a pickled string, an archive member's name, a file name) is checked
    where it enters: a lone surrogate would otherwise fail later, far from its source, when a table or JSON is
    written."""
    problem = not_unicode(text)
    if problem is not None:
        raise ValueError(f"{what} {text[:80]!r} is not valid Unicode ({problem.removeprefix('$: ')})")
    return text


def digest(data: bytes | str) -> str:
    """xxh3-128 hex digest of bytes (str is UTF-8 encoded)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return xxhash.xxh3_128_hexdigest(data)


def digest_value(value: Any) -> str:
    """Digest of a JSON-able value through its canonical form."""
    return digest(canonical_bytes(value))


# The least buffer file_blocks reads a file through: a file growing while it is read is not read a few bytes at a time.
SMALL_BLOCK = 1 << 16


def file_blocks(path: Path, chunk: int = 1 << 22) -> Iterator[memoryview]:
    """A file's bytes, a block of at most `chunk` at a time, each read into the same buffer (sized to a smaller regular
    file, at least SMALL_BLOCK): reading a file costs about its own size, not a new chunk per read. A block is valid
    until the next one is read."""
    with open(path, "rb", buffering=0) as handle:
        info = os.fstat(handle.fileno())
        size = max(info.st_size + 1, SMALL_BLOCK) if stat.S_ISREG(info.st_mode) else chunk
        buffer = memoryview(bytearray(max(1, min(chunk, size))))
        while read := handle.readinto(buffer):
            yield buffer[:read]


def digest_file(path: Path, chunk: int = 1 << 22) -> str:
    hasher = xxhash.xxh3_128()
    for block in file_blocks(path, chunk):
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
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if full := disk_full(exc, path):
            raise full from exc
        raise


def _written(value: Any, dump: Callable[[Any], str]) -> str:
    """dump(value); where it refuses a value (a NaN or an infinity: the writers allow none), the ValueError names the
    first non-finite float's place (walked only then: the walk costs more than the dump)."""
    try:
        return dump(value)
    except ValueError:
        _check_floats(value)
        raise


def write_json(path: Path, value: Any, *, pretty: bool = True) -> None:
    text = _written(value, pretty_json) if pretty else _written(value, canonical_json) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def write_jsonl(path: Path, rows: list[Any]) -> None:
    atomic_write_bytes(path, b"".join(_written(row, canonical_json).encode("utf-8") + b"\n" for row in rows))
