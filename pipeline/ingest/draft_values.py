"""`corpus draft`'s reading of value columns: the unit a header writes ('Value (°F)'), one value-column pattern for
files whose headers differ only in it ('Value (*)'), state columns (On/Off, Occupied/UnOccupied) and the files a
glob matches that the draft leaves out, each with its reason."""

from __future__ import annotations

import os
import re
from pathlib import Path

from contracts.lexicon import PointLexicon

HEADER_UNIT = re.compile(r"[(\[]\s*([^()\[\]]+?)\s*[)\]]\s*$")  # 'Value (°F)', 'Supply Temp [degC]'


def header_unit(name: str) -> str | None:
    """The unit a column name writes at its end in parentheses or brackets, as written; None when it writes none."""
    found = HEADER_UNIT.search(name)
    return found.group(1) if found else None


def unit_for(name: str, lexicon: PointLexicon | None, proposed: str | None) -> str:
    """The unit the draft writes for a stream: the header's (through the lexicon's [units]; TODO when it is not
    listed), else what the lexicon proposed by the name's words: never one that contradicts the file."""
    written = header_unit(name)
    if written is None:
        return proposed or ""
    units = lexicon.units if lexicon else {}
    return units.get(written) or next((v for k, v in units.items() if k.lower() == written.lower()), "TODO")


def value_column(names: list[str]) -> str:
    """The value column of files whose value headers differ (Value (°F), Value (in/wc)): the common start and end
    around a '*', or the one name when they agree."""
    distinct = sorted(set(names))
    if len(distinct) == 1:
        return distinct[0]
    prefix = os.path.commonprefix(distinct)
    suffix = os.path.commonprefix([n[len(prefix) :][::-1] for n in distinct])[::-1]
    return f"{prefix}*{suffix}"


def is_states(cells: list[str], states: dict[str, float]) -> bool:
    """A column of state texts only (On/Off, TRUE/FALSE...), at least one present."""
    present = [c.strip() for c in cells if c.strip()]
    return bool(present) and bool(states) and all(c.lower() in states for c in present)


def states_line(tokens: set[str], states: dict[str, float]) -> str | None:
    """The [cleaning] states line for the state texts found, spelled as the files spell them."""
    if not tokens:
        return None
    pairs = ", ".join(f'"{t}" = {states[t.lower()]:g}' for t in sorted(tokens, key=lambda t: (states[t.lower()], t)))
    return (
        f"states = {{{pairs}}}  # state columns (binary or enumerated points): each state stands for this number; "
        "check the numbers"
    )


def excluded(raw: Path, glob: str, kept: list[str], reasons: dict[str, str]) -> list[tuple[str, str]]:
    """The files the glob matches that are not the kept value files, each with why it is left out."""
    matched = sorted(p.relative_to(raw).as_posix() for p in raw.glob(glob) if p.is_file())
    return [(rel, reasons.get(rel, "not alike the value files")) for rel in matched if rel not in set(kept)]


def unread_reason(path: Path) -> str:
    """Why a file under the raw folder is no value file the draft could read: header only, empty or other."""
    try:
        lines = [line for line in path.read_text(encoding="utf-8-sig", errors="replace").splitlines() if line.strip()]
    except OSError:
        return "unreadable"
    if not lines:
        return "empty"
    if len(lines) == 1:
        return "holds only its header"
    return "no time column read in it"
