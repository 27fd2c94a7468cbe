"""TOML text read with its nesting bounded: tomllib parses arrays and inline tables recursively, so a file nesting
thousands deep (a --prices table is user input) would end in a RecursionError traceback. The depth is measured on
the text first, iteratively, and a file beyond MAX_TOML_DEPTH is refused in one line."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pipeline.core.errors import ConfigError

MAX_TOML_DEPTH = 32  # no config nests values more than a few levels; tomllib recurses per level


def toml_depth(text: str) -> int:
    """The deepest nesting of arrays and inline tables (`[`/`{`) outside strings and comments; a table header
    counts as one level. Iterative, so any depth is measured."""
    depth = deepest = i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c in "\"'":
            i = _string_end(text, i)
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth = max(0, depth - 1)
        i += 1
    return deepest


def _string_end(text: str, start: int) -> int:
    """The index of the last character of the string opening at `start` (basic strings honour backslash escapes,
    literal ones do not; a triple quote opens a multi-line string); an unclosed string runs to the end."""
    quote = text[start]
    delimiter = quote * 3 if text.startswith(quote * 3, start) else quote
    i = start + len(delimiter)
    while i < len(text):
        if quote == '"' and text[i] == "\\":
            i += 2
            continue
        if text.startswith(delimiter, i):
            end = i + len(delimiter)
            while end < len(text) and len(delimiter) == 3 and text[end] == quote and end - i < 5:
                end += 1  # a multi-line string may end in one or two of its own quotes: """a"""" is 'a"'
            return end - 1
        if len(delimiter) == 1 and text[i] == "\n":
            return i - 1  # a one-line string never spans lines: tomllib reports it
        i += 1
    return len(text) - 1


def read_toml(path: Path, data: bytes | None = None) -> dict[str, Any]:
    """A TOML file parsed (from `data`, its bytes, when given), its nesting bounded first; bad syntax, bad UTF-8 or
    too deep a nesting is a ConfigError naming the file."""
    try:
        text = path.read_text(encoding="utf-8") if data is None else _newlines(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the syntax") from exc
    if toml_depth(text) > MAX_TOML_DEPTH:
        raise ConfigError(
            f"{path}: arrays or inline tables nested deeper than {MAX_TOML_DEPTH} levels; flatten the file"
        )
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the syntax") from exc


def _newlines(text: str) -> str:
    """What read_text's universal newlines make of the text."""
    return text.replace("\r\n", "\n").replace("\r", "\n")
