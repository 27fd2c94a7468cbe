"""What the paths of alike value files say, for `corpus draft`: which part of a path names the site, which the stream
(one file per stream), and which only a shard of the same streams (numbered chunks `data_1.csv ... data_11.csv`,
`part-003.csv`, or years `2019.csv`, `meter_2020.csv`), down nested trees such as `b12/electricity/2019.csv`.

A part that varies is a shard when its values read as years, or as a chunk number (after a word such as part or
chunk, or numbered 0 or 1 upwards without a gap), and the files it tells apart follow each other in time (each ends
after the previous one and starts no earlier than its last tenth): rooms numbered 1 to 45 are sites, for their files
cover the same days."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

SEPARATORS = re.compile(r"([_\-. ]+)")
YEAR = re.compile(r"(19|20)\d{2}")
SHARD_OVERLAP = 0.1  # a shard may repeat at most this share of the previous shard's span
CHUNK_WORDS = re.compile(r"(?i)^(part|chunk|shard|split|batch|page|seq|segment|file|data|export|dump|p)$")
PLACE_WORDS = {
    "room": "room",
    "rooms": "room",
    "building": "building",
    "buildings": "building",
    "bldg": "building",
    "house": "house",
    "home": "home",
    "zone": "zone",
    "floor": "floor",
    "apartment": "apartment",
    "apt": "apartment",
    "flat": "flat",
    "office": "office",
    "site": "site",
    "station": "station",
    "unit": "unit",
    "lab": "lab",
    "school": "school",
    "store": "store",
    "dwelling": "dwelling",
    "household": "household",
}

# Words that name equipment, with the Brick class of it: in `AHU1_SAT.csv ... AHU6_OCC.csv` (one building's trend
# export, one file per point) the part before the point names the air handler, not a site.
EQUIPMENT_WORDS = {
    "ahu": "Air_Handling_Unit",
    "rtu": "Rooftop_Unit",
    "fcu": "Fan_Coil_Unit",
    "vav": "Variable_Air_Volume_Box",
    "boiler": "Boiler",
    "chiller": "Chiller",
    "pump": "Pump",
    "inverter": "Inverter",
}


def equipment_type(values: list[str]) -> str | None:
    """The Brick class of equipment named by values such as AHU1, AHU2 (one equipment word and a number), else None."""
    words = {re.sub(r"[_\-. ]*\d+$", "", v).lower() for v in values}
    if len(words) != 1 or not all(re.search(r"\d$", v) for v in values):
        return None
    return EQUIPMENT_WORDS.get(words.pop())


@dataclass(frozen=True)
class Part:
    """One position of the paths: a literal (the same in every path) or a varying token and its role."""

    literal: str | None  # the text when every path has it
    role: str | None = None  # site, key, year, part, or another group name
    regex: str = ""  # the group's body


@dataclass
class Paths:
    """The paths' pattern and what each file is: its site, stream key and shard."""

    glob: str
    pattern: str
    roles: list[str]  # the named groups, in path order
    why: str
    values: dict[str, dict[str, str]]  # rel -> group -> value
    site_label: str | None  # e.g. "room {site}" when the word before the site says what a site is

    def value(self, rel: str, role: str) -> str | None:
        return self.values[rel].get(role)

    @property
    def shards(self) -> list[str]:
        return [r for r in self.roles if r in ("year", "part")]


def _tokens(rel: str) -> list[str]:
    """The path split into alternating tokens and separators ('/' included), the extension kept as one literal."""
    stem, ext = os.path.splitext(rel)
    parts: list[str] = []
    for i, component in enumerate(stem.split("/")):
        if i:
            parts.append("/")
        parts += SEPARATORS.split(component)
    return [*parts, ext] if ext else parts


def _is_separator(token: str) -> bool:
    return token == "/" or bool(SEPARATORS.fullmatch(token))


def _body(values: list[str], last_in_component: bool) -> str:
    """A group's regex: digits, a common prefix and digits (b12, L4), or anything up to the next separator."""
    if all(v.isdigit() for v in values):
        return r"\d+"
    prefix = os.path.commonprefix(values)
    if prefix and re.fullmatch(r"[A-Za-z]+", prefix) and all(v[len(prefix) :].isdigit() for v in values):
        return re.escape(prefix) + r"\d+"
    return "[^/]+" if last_in_component else "[^/]+?"


def _common_suffix(values: list[str]) -> str:
    """The letters every value ends with (not digits: 11 and 21 are numbers), leaving something of each."""
    suffix = re.sub(r"^\d+", "", os.path.commonprefix([v[::-1] for v in values])[::-1])
    return suffix if suffix and all(len(v) > len(suffix) for v in values) else ""


def _ordered_apart(files: list[str], position: int, tokens: dict[str, list[str]], spans: dict) -> bool:
    """The files told apart by the token at `position` (the others alike) follow each other in time: each ends after
    the one before and starts no earlier than the last tenth of it (an export that repeats the previous file's last
    day is still a shard; the merge applies the duplicate rule to what repeats)."""
    streams: dict[tuple, list[tuple[int, str]]] = {}
    for rel in files:
        others = tuple(t for i, t in enumerate(tokens[rel]) if i != position)
        streams.setdefault(others, []).append((int(tokens[rel][position]), rel))
    for members in streams.values():
        members.sort()
        for (_, before), (_, after) in zip(members, members[1:], strict=False):
            if spans.get(before) is None or spans.get(after) is None:
                return False
            (first, last), (start, end) = spans[before], spans[after]
            if end <= last or start < last - (last - first) * SHARD_OVERLAP:
                return False
    return True


def _shard_role(files: list[str], position: int, tokens: dict[str, list[str]], spans: dict) -> str | None:
    values = [tokens[rel][position] for rel in files]
    if not all(v.isdigit() for v in values) or len(set(values)) < 2:
        return None
    before = tokens[files[0]][position - 2] if position >= 2 else ""
    numbers = sorted({int(v) for v in values})
    if all(YEAR.fullmatch(v) for v in values):
        role = "year"
    elif (
        CHUNK_WORDS.match(before or "")
        or numbers == list(range(numbers[0], numbers[0] + len(numbers)))
        and (numbers[0] in (0, 1))
    ):
        role = "part"
    else:
        return None
    return role if _ordered_apart(files, position, tokens, spans) else None


def _why(named: list[str], shards: list[str]) -> str:
    """What the varying parts of the paths are, for the file_pattern's comment."""
    varying = [r for r in named if r not in ("year", "part")]
    why = f"the part that varies is the {varying[0]}" if len(varying) == 1 else "the parts that vary: "
    why = why if len(varying) == 1 else why + (", ".join(varying) or "shards only")
    if shards:
        why += (
            f"; {' and '.join(shards)} tell shards of the same streams apart (numbered in time order, each after "
            "the one before): merged, not sites"
        )
    return why


def _named_folder_below(tokens: list[str], position: int) -> int | None:
    """In a tree such as `UCam_Building_b12/electricity/2019.csv`, where only the folder at `position` names the
    files apart (and shards), the folder just below it, one word the same in every path, names the stream: the
    varying folder is then the site (one stream per site), not the stream. None when there is no such folder."""
    slashes = [i for i, t in enumerate(tokens) if t == "/"]
    after = [i for i in slashes if i > position]
    if len(after) < 2 or any(i > position and i < after[0] and not _is_separator(t) for i, t in enumerate(tokens)):
        return None  # the varying token is not the end of a folder name, or no whole folder lies below it
    folder = tokens[after[0] + 1 : after[1]]
    return after[0] + 1 if len(folder) == 1 and re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", folder[0]) else None


def _roles(
    files: list[str], tokens: dict[str, list[str]], varying: list[int], per_stream: bool, spans: dict
) -> tuple[dict[int, str], int | None]:
    """What each varying position of the paths is (shard, site, key, meter ...), and the position of a folder the
    same in every path that names the stream when only the site varies (None otherwise)."""
    roles: dict[int, str] = {}
    for i in varying:
        shard = _shard_role(files, i, tokens, spans)
        if shard:
            roles[i] = shard
    rest = [i for i in varying if i not in roles]
    below = _named_folder_below(tokens[files[0]], rest[0]) if per_stream and len(rest) == 1 else None
    if below is not None:  # b12/electricity/2019.csv with one meter: the varying folder is the site
        names, ordered = ["site", "key"], [rest[0], below]
    elif per_stream:
        names = ["site", "key"] if len(rest) >= 2 else ["key"]
        ordered = [rest[0], rest[-1]] if len(rest) >= 2 else rest
        if len(rest) >= 2 and equipment_type([tokens[rel][rest[0]] for rel in files]):
            names[0] = "equipment"  # AHU1_SAT.csv: one building's air handlers, not sites
    else:
        names, ordered = (["site"], rest[:1]) if rest else ([], [])
    roles |= dict(zip(ordered, names, strict=False))
    extra = 0
    for i in rest:
        if i not in roles:
            extra += 1
            roles[i] = "meter" if extra == 1 else f"group{extra}"
    return roles, below


def read_paths(files: list[str], per_stream: bool, spans: dict[str, tuple[int, int] | None]) -> Paths | None:
    """The structure of alike files' paths (sorted), or None when they do not split into the same tokens."""
    tokens = {rel: _tokens(rel) for rel in files}
    shape = {tuple(t if _is_separator(t) else "" for t in toks) for toks in tokens.values()}
    if len(shape) != 1 or len(files) < 2:
        return None
    width = len(tokens[files[0]])
    varying = [i for i in range(width) if len({tokens[rel][i] for rel in files}) > 1]
    roles, below = _roles(files, tokens, varying, per_stream, spans)
    if any(roles[i] == "part" for i in roles) and list(roles.values()).count("part") > 1:
        return None  # two chunk numbers: read it by hand
    pattern, glob = "", ""
    slashes = [i for i, t in enumerate(tokens[files[0]]) if t == "/"]
    name_from = slashes[-1] + 1 if slashes and not any(i < slashes[-1] for i in roles) else 0  # folders all alike
    for i in range(width):
        token = tokens[files[0]][i]
        if i not in roles:
            pattern += "" if i < name_from else re.escape(token) if token != "/" else "/"
            glob += re.sub(r"([*?\[\]])", r"[\1]", token)
            continue
        values = [tokens[rel][i] for rel in files]
        after = tokens[files[0]][i + 1] if i + 1 < width else None
        last = after is None or after == "/" or (i + 2 == width and after.startswith("."))
        suffix = "" if roles[i] in ("year", "part") else _common_suffix(values)
        if suffix:  # 124hhw, 58hhw: the site is the number
            last = False
            for rel in files:
                tokens[rel][i] = tokens[rel][i][: -len(suffix)]
            values = [v[: -len(suffix)] for v in values]
        body = r"\d{4}" if roles[i] == "year" else _body(values, last)
        pattern += f"(?P<{roles[i]}>{body})" + re.escape(suffix)
        glob += ("" if glob.endswith("*") else "*") + suffix
    values = {rel: {roles[i]: tokens[rel][i] for i in sorted(roles)} for rel in files}
    named = [roles[i] for i in sorted(roles)]
    site_at = next((i for i, r in roles.items() if r == "site"), None)
    word = tokens[files[0]][site_at - 2].lower() if site_at is not None and site_at >= 2 else ""
    label = f"{PLACE_WORDS[word]} {{site}}" if word in PLACE_WORDS else None
    shards = [r for r in named if r in ("year", "part")]
    why = _why([r for i, r in sorted(roles.items()) if i != below], shards)
    if below is not None:
        why += "; the folder below the site, the same in every path, names the stream (key)"
    return Paths(glob, pattern, named, why, values, label)


def place_label(name: str, last: bool = False) -> str | None:
    """'building {site}' for a site column named building_id, Bldg or rooms (or, with `last`, a file-name prefix
    such as 'room_'); None when the name says nothing of what a site is."""
    words = [w for w in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", name.strip()) if w]
    word = (words[-1] if last else words[0]).lower() if words else ""
    return f"{PLACE_WORDS[word]} {{site}}" if word in PLACE_WORDS else None
