"""Generated raw corpora of the shapes real telemetry comes in (issue 39): a short office corpus of many rooms, one
wide CSV per room or all rooms in one file with a room column; an estate archive sharded by building, meter and
year. The office values follow a day's occupancy with room-to-room variety; outages are drawn per room and
day so that weeks hold good, gappy and missing stretches (the three commitment outcomes), none shared by every room."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import numpy as np

SENSORS = ("co2", "humidity", "light", "pir", "temperature")
START = dt.datetime(2023, 3, 1, tzinfo=dt.UTC)  # a Wednesday: the span begins and ends in partial weeks


def office_rows(room: int, days: int, step_minutes: int, seed: int, outages: bool = True) -> list[str]:
    """The lines of one room's wide CSV (header first): timestamp, co2, humidity, light, pir, temperature; without
    `outages`, every reading is there (every commitment would be to answer)."""
    rng = np.random.default_rng(seed * 1000 + room)
    steps = days * 24 * 60 // step_minutes
    lines = ["timestamp," + ",".join(SENSORS)]
    down = []  # (first step, last step) of each stretch without readings
    for day in range(days if outages else 0):
        kind = rng.random()
        if kind < 0.12:  # a whole day down: coverage too low to report the week
            down.append((day * 24 * 60 // step_minutes, (day + 1) * 24 * 60 // step_minutes - 1))
        elif kind < 0.45:  # a few hours down: a long gap inside the day
            first = (day * 24 + int(rng.integers(0, 20))) * 60 // step_minutes
            down.append((first, first + int(rng.integers(2, 5)) * 60 // step_minutes))
    base_temp, base_co2 = 20 + rng.random() * 3, 420 + rng.random() * 60
    for i in range(steps):
        if any(lo <= i <= hi for lo, hi in down):
            continue
        at = START + dt.timedelta(minutes=i * step_minutes)
        hour = at.hour + at.minute / 60
        occupied = at.weekday() < 5 and 8 <= hour < 18 and rng.random() < 0.8
        co2 = base_co2 + (350 + 80 * math.sin(hour) if occupied else 0) + rng.normal(0, 15)
        humidity = 40 + 6 * math.sin(2 * math.pi * hour / 24) + rng.normal(0, 1.5)
        light = (300 + rng.normal(0, 40) if occupied else max(0.0, 20 * math.sin(math.pi * (hour - 6) / 12))) + 0.0
        temperature = (
            base_temp + (1.5 if occupied else 0) + 0.8 * math.sin(2 * math.pi * hour / 24) + rng.normal(0, 0.1)
        )
        cells = [f"{co2:.1f}", f"{humidity:.2f}", f"{light:.1f}", str(int(occupied)), f"{temperature:.2f}"]
        if outages and rng.random() < 0.002:
            cells[int(rng.integers(0, len(cells)))] = ""
        lines.append(at.strftime("%Y-%m-%d %H:%M:%S") + "," + ",".join(cells))
    return lines


def write_office(
    raw: Path, rooms: int, days: int, step_minutes: int = 10, seed: int = 7, outages: bool = True
) -> list[str]:
    """One `room_<number>.csv` per room under `raw`; returns the room numbers (the site keys)."""
    raw.mkdir(parents=True, exist_ok=True)
    names = [str(401 + 2 * r) for r in range(rooms)]
    for room, name in enumerate(names):
        text = "\n".join(office_rows(room, days, step_minutes, seed, outages)) + "\n"
        (raw / f"room_{name}.csv").write_text(text, encoding="utf-8")
    return names


OFFICE_POINTS = {  # what a user fills in: the Brick class and unit of each sensor
    "co2": ("CO2_Sensor", "PPM"),
    "humidity": ("Relative_Humidity_Sensor", "PERCENT_RH"),
    "light": ("Illuminance_Sensor", "LUX"),
    "pir": ("Occupancy_Sensor", None),
    "temperature": ("Zone_Air_Temperature_Sensor", "DEG_C"),
}


def write_office_in_one_file(raw: Path, rooms: int, days: int, step_minutes: int = 10, seed: int = 7) -> list[str]:
    """Every room in one wide `readings.csv`: timestamp, room, then the five sensors; rows by time, then room."""
    raw.mkdir(parents=True, exist_ok=True)
    names = [str(401 + 2 * r) for r in range(rooms)]
    rows = []
    for room, name in enumerate(names):
        for line in office_rows(room, days, step_minutes, seed)[1:]:
            stamp, cells = line.split(",", 1)
            rows.append((stamp, name, cells))
    lines = ["timestamp,room," + ",".join(SENSORS)] + [f"{s},{n},{c}" for s, n, c in sorted(rows)]
    (raw / "readings.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return names


METERS = {"electricity": ("Electric_Power_Sensor", "KiloW"), "gas": ("Gas_Flow_Sensor", "M3-PER-HR")}


def write_estate(
    raw: Path, buildings: int, first: dt.date, last: dt.date, seed: int = 11, overlap_hours: int = 0
) -> dict[str, int]:
    """An estate archive laid out as `b<N>/<meter>/<YYYY>.csv` (timestamp, value; hourly), one file per building,
    meter and calendar year; each year's file after the first repeats the previous year's last `overlap_hours`
    readings, as archives cut by export date do. Returns the distinct readings per (building, meter). Outages are
    drawn per building and day, as in the office corpus."""
    written = {}
    for b in range(buildings):
        for m, meter in enumerate(sorted(METERS)):
            rng = np.random.default_rng(seed * 1000 + b * 10 + m)
            base = 40 + 30 * rng.random() if meter == "electricity" else 8 + 6 * rng.random()
            by_year: dict[int, list[str]] = {}
            day = first
            while day <= last:
                kind, start = rng.random(), int(rng.integers(0, 20))
                down = range(24) if kind < 0.05 else range(start, start + int(rng.integers(2, 5))) if kind < 0.3 else ()
                for hour in range(24):
                    if hour in down:
                        continue
                    busy = day.weekday() < 5 and 8 <= hour < 18
                    seasonal = math.cos(2 * math.pi * (day.timetuple().tm_yday - 15) / 365)
                    value = base * (1 + (0.6 if busy else 0) + (0.3 if meter == "gas" else 0.05) * seasonal)
                    at = dt.datetime(day.year, day.month, day.day, hour)
                    by_year.setdefault(day.year, []).append(f"{at:%Y-%m-%d %H:%M},{value + rng.normal(0, 1):.3f}")
                day += dt.timedelta(days=1)
            years = sorted(by_year)
            for year in years:
                carried = by_year[year - 1][-overlap_hours:] if overlap_hours and year - 1 in by_year else []
                path = raw / f"b{b + 1}" / meter / f"{year}.csv"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("timestamp,value\n" + "\n".join(carried + by_year[year]) + "\n", encoding="utf-8")
            written[f"b{b + 1}/{meter}"] = sum(len(v) for v in by_year.values())
    return written


BUILDING_WEEKS = {"healthy": 0.45, "dropouts": 0.25, "down": 0.30}  # each room's weeks, by what its sensors had


def write_building(
    raw: Path,
    rooms: int,
    days: int,
    step_minutes: int = 30,
    seed: int = 5,
    sensors: tuple[str, ...] = SENSORS,
    outage_every_days: float | None = None,
) -> list[str]:
    """One building's trend export: one wide `building.csv` (timestamp, then `room<N>_<sensor>` for each room and
    sensor), each room's diurnal readings as in the office corpus. Each sensor's calendar week is drawn
    (BUILDING_WEEKS): healthy (a reading left empty now and then), dropouts (15% of its readings lost: a usable but
    thinner week) or down (one to two days without readings). With `outage_every_days`, each sensor also drops out
    about that often, for 2.25 to 4 days (a wireless sensor's battery or gateway): a few days of data then hold long
    gaps wherever a short time plan's blocks fall. Returns the room names."""
    raw.mkdir(parents=True, exist_ok=True)
    names = [f"room{101 + r}" for r in range(rooms)]
    by_time: dict[str, dict[str, str]] = {}
    for room, name in enumerate(names):
        rng = np.random.default_rng(seed * 7919 + room)
        regimes: dict[tuple[str, int], tuple[str, int, int]] = {}
        dropped = _outages(rng, sensors, days, outage_every_days) if outage_every_days else {}
        for line in office_rows(room, days, step_minutes, seed, outages=False)[1:]:
            stamp, *cells = line.split(",")
            at = dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S")
            week = (at.date() - dt.date(2023, 2, 27)).days // 7
            row = by_time.setdefault(stamp, {})
            for sensor, cell in zip(SENSORS, cells, strict=True):
                if (sensor, week) not in regimes:
                    kind = str(rng.choice(list(BUILDING_WEEKS), p=list(BUILDING_WEEKS.values())))
                    regimes[(sensor, week)] = (kind, int(rng.integers(0, 6)), int(rng.integers(1, 3)))
                kind, first_day, length = regimes[(sensor, week)]
                down = kind == "down" and first_day <= at.weekday() < first_day + length
                down = down or any(lo <= at < hi for lo, hi in dropped.get(sensor, ()))
                if not down and not (kind == "dropouts" and rng.random() < 0.15):
                    row[f"{name}_{sensor}"] = "" if rng.random() < 0.002 else cell
    columns = [f"{name}_{sensor}" for name in names for sensor in sensors]
    lines = ["timestamp," + ",".join(columns)]
    lines += [f"{stamp}," + ",".join(row.get(c, "") for c in columns) for stamp, row in sorted(by_time.items())]
    (raw / "building.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return names


def _outages(rng: np.random.Generator, sensors: tuple[str, ...], days: int, every: float) -> dict[str, list]:
    """Per sensor, the (start, end) naive datetimes of its dropouts: one starts on a day with probability 1 / `every`,
    at a drawn hour, and lasts 54 to 96 hours (the middle of it more than a day from any reading)."""
    first = START.replace(tzinfo=None)
    found: dict[str, list] = {}
    for sensor in sensors:
        for day in range(days):
            if rng.random() < 1 / every:
                start = first + dt.timedelta(days=day, hours=int(rng.integers(0, 24)))
                found.setdefault(sensor, []).append((start, start + dt.timedelta(hours=int(rng.integers(54, 97)))))
    return found
