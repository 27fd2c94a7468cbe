"""Exports as facility teams bring them (issue 52), written for tests: a building-automation trend export (one file
per point, US month-first dates, a 12-hour clock with CST/CDT in some files, units in the value header, change-of-value
binaries, a file holding only its header) and a room-by-room export (one wide CSV per room, 5-minute rows written
`2021-09-07 00:00 +08:00`, sparse days over several weeks, one room whose file has other columns). Outages are drawn
per file and day, so that weeks hold good, gappy and missing stretches."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np

CHICAGO = ZoneInfo("America/Chicago")
BAS_START = dt.datetime(2022, 3, 1, 6, tzinfo=dt.UTC)  # local midnight; the span crosses the switch to CDT (13 March)
# point -> (value header, mean, daily swing, noise); air handlers with an even number write a 12-hour clock with CST/CDT
BAS_POINTS = {
    "SAT": ("Value (°F)", 55.0, 3.0, 0.4),
    "RAT": ("Value (°F)", 72.0, 2.0, 0.3),
    "DSP": ("Value (in/wc)", 1.2, 0.3, 0.05),
}
BAS_STATES = {"SF": ("Value (On/Off)", "On", "Off"), "OCC": ("Value (Occ)", "Occupied", "UnOccupied")}
BAS_EMPTY = "AHU1_DMP"  # a damper point whose export holds only its header


def _month_first(at: dt.datetime) -> str:
    local = at.astimezone(CHICAGO)
    return f"{local.month}/{local.day}/{local.year} {local.hour}:{local.minute:02d}"


def _twelve_hour(at: dt.datetime) -> str:
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


def write_bas_export(
    raw: Path, air_handlers: int = 6, days: int = 30, step_minutes: int = 5, seed: int = 3
) -> dict[str, int]:
    """One CSV per point of each air handler (AHU<n>_<point>.csv) under `raw`; returns the data rows per file."""
    raw.mkdir(parents=True, exist_ok=True)
    per_day, written = 24 * 60 // step_minutes, {}
    for unit in range(1, air_handlers + 1):
        twelve = unit % 2 == 0
        for index, (point, (header, mean, swing, noise)) in enumerate(BAS_POINTS.items()):
            rng = np.random.default_rng(seed * 1000 + unit * 10 + index)
            down = _down_steps(rng, days, per_day)
            lines = [f"Timestamp,{header}"]
            for step in range(days * per_day):
                if step in down:
                    continue
                at = BAS_START + dt.timedelta(minutes=step * step_minutes)
                hour = at.astimezone(CHICAGO).hour + at.minute / 60
                value = mean + unit / 4 + swing * math.sin(2 * math.pi * (hour - 9) / 24) + rng.normal(0, noise)
                lines.append(f"{_twelve_hour(at) if twelve else _month_first(at)},{value:.2f}")
            written[f"AHU{unit}_{point}"] = _write(raw / f"AHU{unit}_{point}.csv", lines)
        for index, (point, (header, on, off)) in enumerate(BAS_STATES.items()):
            rng = np.random.default_rng(seed * 1000 + unit * 10 + 5 + index)
            lines, at, state = [f"Timestamp,{header}"], BAS_START, True
            down = _down_steps(rng, days, per_day)  # the steps whose changes were not logged, as for the readings
            while at < BAS_START + dt.timedelta(days=days):  # change of value: a row only when the state changes
                if (at - BAS_START) // dt.timedelta(minutes=step_minutes) not in down:
                    lines.append(f"{_month_first(at)},{on if state else off}")
                at += dt.timedelta(minutes=int(rng.integers(1, 4)) * step_minutes)
                state = not state
            written[f"AHU{unit}_{point}"] = _write(raw / f"AHU{unit}_{point}.csv", lines)
    written[BAS_EMPTY] = _write(raw / f"{BAS_EMPTY}.csv", ["Timestamp,Value (%)"])
    return written


def _write(path: Path, lines: list[str]) -> int:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines) - 1


ROOM_START = dt.datetime(2021, 9, 6, 16, tzinfo=dt.UTC)  # 7 September 00:00 at +08:00
PLUS_EIGHT = dt.timezone(dt.timedelta(hours=8))
FAN_COIL = ("FCU_SupplyTemp", "FCU_ReturnTemp", "FCU_FanSpeed", "RoomTemp", "RoomCO2")
AIR_HANDLER = ("AHU_SupplyTemp", "AHU_ReturnTemp", "AHU_StaticPressure", "RoomTemp", "RoomCO2")


def write_room_export(raw: Path, rooms: int = 6, weeks: int = 16, days_with_rows: int = 29, seed: int = 6) -> None:
    """One wide CSV per room (`Room_<n>.csv`), 5-minute rows on `days_with_rows` days spread over `weeks` weeks;
    the last room is served by an air handler, so its file has other columns."""
    raw.mkdir(parents=True, exist_ok=True)
    for room in range(1, rooms + 1):
        rng = np.random.default_rng(seed * 100 + room)
        columns = AIR_HANDLER if room == rooms else FAN_COIL
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
