"""Slots of a candidate (derived phrases and dates) and the rendering of query texts and call templates."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from contracts.tasks import CallSet
from pipeline.core.errors import RenderError, TimestampError
from pipeline.tools.access import words
from pipeline.tools.timeutil import format_us, parse_us

WHOLE = re.compile(r"^\{([a-z_][a-z0-9_.]*)\}$")
EACH = re.compile(r"^\{each:([a-z][a-z0-9_]*)\.([A-Za-z0-9_.\[\]]+)\}$")
ANY = re.compile(r"\{([a-z_][a-z0-9_.]*)\}")


@lru_cache(maxsize=65536)
def point_phrase(label: str) -> str:
    """A stream label as an operator says it: 'Supply water temperature - Building 127' -> '... in Building 127'."""
    text = label.replace(" - ", " in ", 1) if " - " in label else label
    text = re.sub(r"\s*\([^)]*\)", "", text).strip()  # drop parenthetical notes such as "(1/0, ...)"
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


# How a label joins its site: 'supply temperature at substation 3', 'gas use of building b12', 'building b12 gas use'.
SITE_JOINTS = (" at ", " in ", " of ", " for ", " on ")


def local_phrase(phrase: str, site_label: str) -> str:
    """A point phrase as said at its own site: a trailing ' at|in|of|for|on <site>' or a leading '<site> ' dropped
    (the site label compared case-insensitively, as a user would say it)."""
    lowered, site = phrase.lower(), site_label.lower()
    for joint in SITE_JOINTS:
        if lowered.endswith(f"{joint}{site}") and len(phrase) > len(joint + site):
            return phrase[: -len(joint + site)]
    for joint in (" ", ": ", " - "):
        if lowered.startswith(f"{site}{joint}") and len(phrase) > len(site + joint):
            rest = phrase[len(site + joint) :]
            return rest[:1].lower() + rest[1:] if rest[:2] != rest[:2].upper() else rest
    return phrase


def class_words(point_class: str) -> str:
    return " ".join(words(point_class.replace("_", " ")))


def measure_words(point_class: str) -> str:
    parts = words(point_class.replace("_", " "))
    return " ".join(parts[:-1] if parts and parts[-1] in {"sensor", "status", "command"} and len(parts) > 1 else parts)


def role_words(role: str | None) -> str:
    return " ".join(re.sub(r"(?<=[a-z])(?=\d)", " ", w) for w in words(role))


def _date(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, UTC)


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def window_slots(start: int, end: int | None) -> dict[str, Any]:
    """Slots of a window: its bounds and how texts name it (day, week_start, month_name, ISO bounds)."""
    moment = _date(start)
    slots = {
        "window_start": start,
        "day": moment.strftime("%Y-%m-%d"),
        "week_start": moment.strftime("%Y-%m-%d"),
        "month_name": moment.strftime("%B %Y"),
        "window_start_iso": format_us(start),
    }
    if end is not None:
        slots.update(window_end=end, window_end_iso=format_us(end))
    return slots


def derive(row: dict, streams: dict[str, dict], sites: dict[str, dict]) -> dict[str, Any]:
    """The candidate row plus derived slots used by templates and calls."""
    slots = {k: v for k, v in row.items()}
    for column, value in row.items():
        if column.endswith("stream_id") and isinstance(value, str) and value in streams:
            prefix = column[: -len("stream_id")]
            stream = streams[value]
            slots[f"{prefix}phrase"] = point_phrase(stream["label"])
            slots[f"{prefix}equipment_words"] = role_words(stream["equipment_role"])
    if "site_id" in row and row["site_id"] in sites:
        slots["site_label"] = sites[row["site_id"]]["label"]
    if "point_class" in row:
        slots["class_words"] = class_words(row["point_class"])
        slots["class_phrase"] = measure_words(row["point_class"]) + (
            f" on the {role_words(row['group_key'])}" if row.get("scope") == "corpus" and row.get("group_key") else ""
        )
    if "window_start" in row:
        slots.update(window_slots(row["window_start"], row.get("window_end")))
    for column in ("anchor", "timestamp", "day_start", "day_end"):
        if column in row:
            slots[f"{column}_iso"] = format_us(row[column])
    if "member_sites" in row:
        members = [
            {"stream_id": s, "site_id": site, "equipment": eq}
            for s, site, eq in zip(row["streams"], row["member_sites"], row["member_equipment"], strict=True)
        ]
        slots["members"] = members
        if row.get("scope") == "corpus":
            labels = [sites[m["site_id"]]["label"] for m in members]
        else:
            labels = ["the " + point_phrase(streams[m["stream_id"]]["label"]) for m in members]
        slots["member_list"] = _join(labels)
    return slots


def _lookup(slots: dict, name: str, item: dict | None) -> Any:
    if name.startswith("item."):
        if item is None:
            raise RenderError(f"{{{name}}} outside a for_each call")
        return item[name[5:]]
    if name not in slots:
        raise RenderError(f"no slot {{{name}}}; slots are {', '.join(sorted(slots))}")
    return slots[name]


def fill_value(template: Any, slots: dict, item: dict | None = None, counts: dict[str, int] | None = None) -> Any:
    """Render one argument template: a whole '{slot}' keeps the slot's type; '{each:r.x}' lists references."""
    if isinstance(template, str):
        each = EACH.match(template)
        if each:
            n = (counts or {}).get(each.group(1), 0)
            return [f"${each.group(1)}{i}.{each.group(2)}" for i in range(1, n + 1)]
        whole = WHOLE.match(template)
        if whole:
            return _lookup(slots, whole.group(1), item)
        return ANY.sub(lambda m: str(_lookup(slots, m.group(1), item)), template)
    if isinstance(template, dict):
        return {k: fill_value(v, slots, item, counts) for k, v in template.items()}
    if isinstance(template, list):
        return [fill_value(v, slots, item, counts) for v in template]
    return template


def calls(callset: CallSet, slots: dict) -> list[dict]:
    """Concrete calls [{id, tool, arguments}] of a call set, for_each expanded."""
    out, counts = [], {}
    for call in callset.calls:
        if call.for_each:
            items = _lookup(slots, call.for_each, None)
            counts[call.id] = len(items)
            for i, item in enumerate(items, start=1):
                out.append(
                    {"id": f"{call.id}{i}", "tool": call.tool, "arguments": fill_value(call.arguments, slots, item)}
                )
        else:
            out.append({"id": call.id, "tool": call.tool, "arguments": fill_value(call.arguments, slots, None, counts)})
    return out


TOKEN = re.compile(r"[\w'’]+")


def doubled_words(text: str) -> list[str]:
    """Words said twice in a row ("the the", "Monday, Monday"): case and the punctuation between them ignored. Only
    words of letters count: numbers repeat in dates and times ("2020-11-11", "00:00"), and a token with a digit or
    an underscore (`offset_seconds`, "19T14") is a value or a field name, not a word."""
    tokens = [t.lower() for t in TOKEN.findall(text)]
    return [
        a for a, b in zip(tokens, tokens[1:], strict=False) if a == b and a.replace("'", "").replace("’", "").isalpha()
    ]


def query(templates: list[str], index: int, slots: dict) -> str:
    return ANY.sub(lambda m: str(_lookup(slots, m.group(1), None)), templates[index])


# ---------------------------------------------------------------- how dates and instants are said
# One style per episode, drawn by hash (never from the gold): an ISO date or words, UTC or the corpus's local time.
DATE_STYLES = (
    "%Y-%m-%d",
    "%d %B %Y",
    "%B %d, %Y",
    "%A %d %B %Y",
)  # as strptime reads them; written without leading zeros
INSTANT_STYLES = ("iso_utc", "iso_local", "words_utc", "words_local")
DATE_SLOTS = ("day", "week_start")
INSTANT_SLOTS = ("timestamp_iso", "anchor_iso", "probe_iso")
WORDS = re.compile(
    r"^(?P<date>.+?),? (?:at )?(?P<time>\d{1,2}:\d{2}(?::\d{2})?)(?: local time)? "
    r"?(?:UTC|\(UTC(?P<offset>[+-]\d{2}:\d{2})\))$"
)


def say_instant(us: int, style: str, zone: str) -> str:
    """An instant as a person writes it: ISO (Z or the local offset) or words (UTC or local with its offset)."""
    moment = _date(us)
    if style.endswith("local") and zone != "UTC":
        moment = moment.astimezone(ZoneInfo(zone))
    if style.startswith("iso"):
        return (
            format_us(us)
            if moment.utcoffset().total_seconds() == 0 and style == "iso_utc"
            else moment.isoformat(timespec="seconds" if moment.microsecond == 0 else "microseconds")
        )
    clock = moment.strftime("%H:%M:%S" if moment.second or moment.microsecond else "%H:%M")
    offset = moment.strftime("%z")
    where = "UTC" if offset in ("+0000", "") else f"(UTC{offset[:3]}:{offset[3:]})"
    return f"{moment.day} {moment.strftime('%B %Y')}, {clock} {where}"


def display(slots: dict[str, Any], date_style: int, instant_style: int, zone: str) -> dict[str, Any]:
    """The slots as texts say them (calls keep the ISO slots)."""
    shown = dict(slots)
    for key in DATE_SLOTS:
        if key in slots:
            day = datetime.strptime(slots[key], "%Y-%m-%d")
            style = DATE_STYLES[date_style]
            shown[key] = day.strftime(style if style.startswith("%Y") else style.replace("%d", str(day.day)))
    for key in INSTANT_SLOTS:
        if key in slots:
            shown[key] = say_instant(parse_us(slots[key]), INSTANT_STYLES[instant_style], zone)
    return shown


def read_back(found: dict[str, str]) -> dict[str, str] | None:
    """Slots read from a text (template inversion) in the canonical forms again: ISO dates and UTC ISO instants;
    None when a date or instant slot does not read as one (the text split at the wrong place)."""
    out = dict(found)
    for key in DATE_SLOTS:
        if key in out:
            for style in DATE_STYLES:
                try:
                    out[key] = datetime.strptime(out[key].strip(), style).strftime("%Y-%m-%d")
                    break
                except ValueError:
                    continue
            else:
                return None
    for key in INSTANT_SLOTS:
        if key in out:
            text = out[key].strip()
            try:
                out[key] = format_us(parse_us(text))
                continue
            except TimestampError:
                pass
            match = WORDS.match(text)
            if not match:
                return None
            clock = match["time"] if match["time"].count(":") == 2 else match["time"] + ":00"
            try:
                day = datetime.strptime(match["date"], "%d %B %Y").strftime("%Y-%m-%d")
            except ValueError:
                return None
            hours = clock.split(":")
            out[key] = format_us(
                parse_us(f"{day}T{int(hours[0]):02d}:{hours[1]}:{hours[2]}{match['offset'] or '+00:00'}")
            )
    return out
