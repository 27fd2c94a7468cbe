"""Exports as facility teams bring them (issue 52), written for tests: a building-automation trend export of one
building (one file per point of each air handler, US month-first dates, a 12-hour clock with CST/CDT in some files,
units in the value header, change-of-value binaries, files holding only their header; which, drawn by seed) and a
room-by-room export (one wide CSV per room, 5-minute rows written `2021-09-07 00:00 +08:00`, sparse days over several
weeks, one room whose file has other columns). Outages are drawn per file and day, so that weeks hold good, gappy and
missing stretches."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np

CHICAGO = ZoneInfo("America/Chicago")
BAS_START = dt.datetime(2022, 3, 1, 6, tzinfo=dt.UTC)  # local midnight; the span crosses the switch to CDT (13 March)
# point -> (value header, mean, daily swing, noise); SAT and RAT on every air handler, the others drawn by seed
BAS_POINTS = {
    "SAT": ("Value (°F)", 55.0, 3.0, 0.4),
    "RAT": ("Value (°F)", 72.0, 2.0, 0.3),
    "DSP": ("Value (in/wc)", 1.2, 0.3, 0.05),
}
# change-of-value binaries: point -> (value header, state when on, state when off)
BAS_STATES = {
    "SF": ("Value (On/Off)", "On", "Off"),
    "OCC": ("Value (Occ)", "Occupied", "UnOccupied"),
    "EF": ("Value (T/F)", "TRUE", "FALSE"),
}
BAS_EMPTY = "DMP"  # a damper point whose export holds only its header


@dataclass(frozen=True)
class BasExport:
    """What a generated trend export holds: its air handlers' points, which of them write a 12-hour clock with
    CST/CDT, and the files holding only a header."""

    points: dict[str, list[str]]  # air handler (AHU<n>) -> its points
    twelve_hour: list[str]  # the air handlers whose files write 02-Mar-22 5:00:01 PM CST
    empty: list[str]  # file names (AHU<n>_DMP.csv)
    rows: dict[str, int]  # file stem -> data rows

    @property
    def keys(self) -> set[str]:
        return {p for points in self.points.values() for p in points}


def month_first(at: dt.datetime) -> str:
    local = at.astimezone(CHICAGO)
    return f"{local.month}/{local.day}/{local.year} {local.hour}:{local.minute:02d}"


def twelve_hour(at: dt.datetime) -> str:
    local = at.astimezone(CHICAGO)
    return local.strftime("%d-%b-%y ") + f"{local.hour % 12 or 12}:{local.minute:02d}:01 " + local.strftime("%p %Z")


def _down_steps(rng: np.random.Generator, days: int, per_day: int, whole: float = 0.05, hours: float = 0.2) -> set[int]:
    """The steps without readings: a whole day down for some days (share `whole`), a few hours for others."""
    down: set[int] = set()
    for day in range(days):
        kind = rng.random()
        if kind < whole:
            down |= set(range(day * per_day, (day + 1) * per_day))
        elif kind < whole + hours:
            first = day * per_day + int(rng.integers(0, per_day * 3 // 4))
            down |= set(range(first, first + int(rng.integers(2, 5)) * per_day // 24))
    return down


def draw_bas(
    seed: int, air_handlers: int | None = None, every_point: bool = False
) -> tuple[dict[str, list[str]], list[str], list[str]]:
    """One building's air handlers (5 to 7 unless given), each one's points (SAT and RAT, the others at even odds
    unless `every_point`, at least one binary in the building), the 12-hour ones (a third of them, none of one) and
    1 or 2 header-only files."""
    rng = np.random.default_rng(seed)
    count = air_handlers or int(rng.integers(5, 8))
    units = [f"AHU{n}" for n in range(1, count + 1)]
    extra = [*list(BAS_POINTS)[2:], *BAS_STATES]
    points = {u: ["SAT", "RAT", *(p for p in extra if every_point or rng.random() < 0.5)] for u in units}
    if not any(p in BAS_STATES for ps in points.values() for p in ps):
        points[units[0]].append(str(rng.choice(list(BAS_STATES))))
    twelve = sorted(rng.choice(units, size=max(1, count // 3), replace=False).tolist()) if count > 1 else []
    empty = sorted(rng.choice(units, size=min(count, int(rng.integers(1, 3))), replace=False).tolist())
    return points, twelve, [f"{u}_{BAS_EMPTY}.csv" for u in empty]


def write_bas_export(
    raw: Path,
    air_handlers: int | None = None,
    days: int = 30,
    step_minutes: int = 5,
    seed: int = 3,
    every_point: bool = False,
) -> BasExport:
    """One building's trend export: one CSV per point of each air handler (AHU<n>_<point>.csv) under `raw`, the
    variant drawn by `seed` (draw_bas)."""
    raw.mkdir(parents=True, exist_ok=True)
    per_day, written = 24 * 60 // step_minutes, {}
    points, twelve, empty = draw_bas(seed, air_handlers, every_point)
    for unit, names in points.items():
        number = int(unit.removeprefix("AHU"))
        for point in names:
            rng = np.random.default_rng([seed, number, list(BAS_POINTS | BAS_STATES).index(point)])
            down = _down_steps(rng, days, per_day)
            if point in BAS_STATES:
                lines = _states(rng, BAS_STATES[point], days, step_minutes, down)
            else:
                stamp = twelve_hour if unit in twelve else month_first
                lines = _readings(rng, BAS_POINTS[point], number, days, step_minutes, down, stamp)
            written[f"{unit}_{point}"] = _write(raw / f"{unit}_{point}.csv", lines)
    for name in empty:
        written[name.removesuffix(".csv")] = _write(raw / name, ["Timestamp,Value (%)"])
    return BasExport(points, twelve, empty, written)


def _readings(rng, spec: tuple, number: int, days: int, step_minutes: int, down: set[int], stamp) -> list[str]:
    header, mean, swing, noise = spec
    lines = [f"Timestamp,{header}"]
    for step in range(days * 24 * 60 // step_minutes):
        if step in down:
            continue
        at = BAS_START + dt.timedelta(minutes=step * step_minutes)
        hour = at.astimezone(CHICAGO).hour + at.minute / 60
        value = mean + number / 4 + swing * math.sin(2 * math.pi * (hour - 9) / 24) + rng.normal(0, noise)
        lines.append(f"{stamp(at)},{value:.2f}")
    return lines


def _states(rng, spec: tuple, days: int, step_minutes: int, down: set[int]) -> list[str]:
    """Change of value: a row only when the state changes (the steps in `down` were not logged)."""
    header, on, off = spec
    lines, at, state = [f"Timestamp,{header}"], BAS_START, True
    while at < BAS_START + dt.timedelta(days=days):
        if (at - BAS_START) // dt.timedelta(minutes=step_minutes) not in down:
            lines.append(f"{month_first(at)},{on if state else off}")
        at += dt.timedelta(minutes=int(rng.integers(1, 4)) * step_minutes)
        state = not state
    return lines


def _write(path: Path, lines: list[str]) -> int:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines) - 1


ROOM_START = dt.datetime(2021, 9, 6, 16, tzinfo=dt.UTC)  # 7 September 00:00 at +08:00
PLUS_EIGHT = dt.timezone(dt.timedelta(hours=8))
FAN_COIL = ("FCU_SupplyTemp", "FCU_ReturnTemp", "FCU_FanSpeed", "RoomTemp", "RoomCO2")
AIR_HANDLER = ("AHU_SupplyTemp", "AHU_ReturnTemp", "AHU_StaticPressure", "RoomTemp", "RoomCO2")


def write_room_export(raw: Path, weeks: int = 16, seed: int = 6) -> tuple[int, int]:
    """One building's rooms, one wide CSV each (`Room_<n>.csv`): 5 to 8 rooms, 5-minute rows on 25 to 35 days spread
    over `weeks` weeks, one room served by an air handler (its file has other columns), drawn by `seed`. Returns
    the number of rooms and the air-handler room."""
    raw.mkdir(parents=True, exist_ok=True)
    drawn = np.random.default_rng(seed)
    rooms, days_with_rows = int(drawn.integers(5, 9)), int(drawn.integers(25, 36))
    served = int(drawn.integers(1, rooms + 1))
    for room in range(1, rooms + 1):
        rng = np.random.default_rng(seed * 100 + room)
        columns = AIR_HANDLER if room == served else FAN_COIL
        days = sorted(rng.choice(weeks * 7, size=days_with_rows, replace=False).tolist())
        lines = ["Time," + ",".join(columns)]
        for day in days:
            gap = range(int(rng.integers(0, 200)), int(rng.integers(200, 260))) if rng.random() < 0.3 else range(0)
            for step in range(288):
                if step in gap:
                    continue
                at = ROOM_START + dt.timedelta(days=day, minutes=5 * step)
                hour = at.astimezone(PLUS_EIGHT).hour
                occupied = 8 <= hour < 18
                values = [
                    16 + rng.normal(0, 0.3),
                    22 + rng.normal(0, 0.3),
                    (60 if occupied else 20) + rng.normal(0, 2) if "FCU" in columns[2] else 250 + rng.normal(0, 5),
                    23 + 1.5 * occupied + rng.normal(0, 0.2),
                    450 + 300 * occupied + rng.normal(0, 20),
                ]
                stamp = at.astimezone(PLUS_EIGHT).strftime("%Y-%m-%d %H:%M") + " +08:00"
                lines.append(stamp + "," + ",".join(f"{v:.2f}" for v in values))
        (raw / f"Room_{room}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rooms, served
