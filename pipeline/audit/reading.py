"""What a rule-based policy can read from the visible conversation: template inversion and a public catalog."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache

import numpy as np

from contracts.episodes import EpisodesConfig
from pipeline.episodes.lift import reply_template
from pipeline.store.compute import DAY, window_bounds
from pipeline.tasks import render
from pipeline.tools.access import ToolStore
from pipeline.tools.timeutil import parse_us

SLOT = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


@lru_cache(maxsize=4096)
def pattern(template: str, greedy: bool = False) -> re.Pattern:
    """A template as a regex: literal text escaped, each {slot} a lazy (or greedy) named group (repeats must agree)."""
    parts, seen, last = [], set(), 0
    for match in SLOT.finditer(template):
        parts.append(re.escape(template[last : match.start()]))
        name = match.group(1)
        parts.append(f"(?P={name})" if name in seen else f"(?P<{name}>.+)" if greedy else f"(?P<{name}>.+?)")
        seen.add(name)
        last = match.end()
    parts.append(re.escape(template[last:]))
    return re.compile("^" + "".join(parts) + "$", re.DOTALL)


def read(templates: list[str], text: str) -> dict | None:
    """Slots of the first template the text matches, else None; dates and instants back in their ISO forms. A phrase
    may hold a template's own words ("... at substation L22 at <time>"): when the first split does not read, the
    other way of splitting is tried."""
    found = _read(tuple(templates), text)
    return dict(found) if found is not None else None  # slot values are strings: the caller's own copy


@lru_cache(maxsize=65536)
def _read(templates: tuple[str, ...], text: str) -> dict | None:
    # every policy reads every prompt of every candidate episode again: 89,000 reads of a few thousand texts (hhw)
    for template in templates:
        for greedy in (False, True):
            match = pattern(template, greedy).match(text.strip())
            found = render.read_back(match.groupdict()) if match else None
            if found is not None:
                return found
    return None


def read_opening(lifts: EpisodesConfig, text: str) -> tuple[str | None, dict | None, str | None]:
    """The family and slots of an opening message, and the slot kind it leaves out (None when it says everything):
    an opening that ends with the reply naming its family's slot (a complete one) says it. Complete openings are read
    first: a plain template ending in a slot would take the reply into that slot."""
    families = sorted(lifts.families.items())
    for name, lift in families:
        reply = reply_template(lifts, lift)
        found = read([f"{t} {reply}" for t in lift.initial], text) if reply else None
        if found is not None:
            return name, found, None
    for name, lift in families:
        found = read(lift.initial, text)
        if found is not None:
            return name, found, None if lift.withhold == "none" else lift.withhold
    return None, None, None


@dataclass
class Catalog:
    """Public metadata a policy may use (what list_points shows for every site): phrases and labels."""

    store: ToolStore
    _phrases: dict[tuple[str | None, str], list[str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        """Each tool-ready stream under its full phrase (any site) and under its phrase without the site (its own)."""
        self._phrases = {}
        for stream_id, row in self.store.streams.items():
            if not row["tool_ready"]:
                continue
            full = render.point_phrase(row["label"])
            label = self.store.sites[row["site_id"]]["label"]
            for key in {(None, full), (row["site_id"], render.local_phrase(full, label))}:
                self._phrases.setdefault(key, []).append(stream_id)

    def site(self, label: str) -> str | None:
        return self.store.site_id(label)

    def by_phrase(self, phrase: str, site: str | None = None) -> list[str]:
        """Streams whose phrase is `phrase`, or whose phrase without the site is `phrase` at `site`."""
        found = set(self._phrases.get((None, phrase), []))
        if site is not None:
            found.update(self._phrases.get((site, phrase), []))
        return sorted(found)

    def by_class_phrase(self, class_phrase: str, sites: list[str]) -> list[str]:
        found = []
        for stream_id, row in self.store.streams.items():
            if row["site_id"] in sites and row["tool_ready"]:
                for text in (
                    render.measure_words(row["point_class"]),
                    f"{render.measure_words(row['point_class'])} on the {render.role_words(row['equipment_role'])}",
                ):
                    if text == class_phrase:
                        found.append(stream_id)
        return sorted(found)


def day_window(day: str) -> tuple[int, int]:
    start = parse_us(f"{day}T00:00:00Z")
    return start, start + DAY


def week_window(day: str) -> tuple[int, int]:
    start = parse_us(f"{day}T00:00:00Z")
    return start, start + 7 * DAY


def month_window(name: str) -> tuple[int, int]:
    moment = datetime.strptime(name, "%B %Y").replace(tzinfo=UTC)
    start, end = window_bounds(np.array([int(moment.timestamp() * 1_000_000)], dtype=np.int64), "month")
    return int(start[0]), int(end[0])


def split_list(text: str) -> list[str]:
    head, _, tail = text.rpartition(" and ")
    return [*(p.strip() for p in head.split(",") if p.strip()), tail.strip()] if head else [text.strip()]
