"""A fleet file for `make bench`: one long CSV holding many sites (a utility's or a portfolio's export), timed through
ingest. Issue 53: 2,000 site ids took 50 s and 100,000 gave no result in 900 s (two scans quadratic in a file's
sites); the target is 100,000 sites in one file in under 60 s."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from pipeline.core.workspace import Workspace
from pipeline.harness.build import build

NAME = "fleet"
MAPPING = """name = "fleet"
title = "a generated fleet file: many sites in one long CSV"

[time]
column = "time"
format = "%Y-%m-%d %H:%M"

[values]
kind = "long_csv"
files = "*.csv"
file_pattern = 'fleet\\.csv'
site_column = "site"
stream_column = "point"
value_column = "value"
stream_id = "{site}__{key}"

[metadata]
kind = "inline"
site_label = "building {site}"

[metadata.points.heat]
point_class = "Thermal_Power_Sensor"
label = "heat power at {site}"
unit = "KiloW"

[metadata.points.flow]
point_class = "Water_Flow_Sensor"
label = "flow at {site}"
"""


def fleet_root(root: Path, project: Path, sites: int, hours: int = 2) -> Workspace:
    """A project under `root` with the fleet mapping and one file of `sites` sites x `hours` hours x 2 points
    (site ids are meter-like codes), the project's shared configs beside it."""
    (root / "configs" / "corpora").mkdir(parents=True, exist_ok=True)
    (root / "configs" / "corpora" / f"{NAME}.toml").write_text(MAPPING, encoding="utf-8")
    for shared in sorted((project / "configs").glob("*.toml")):
        shutil.copyfile(shared, root / "configs" / shared.name)
    raw = root / "data" / "raw" / NAME
    raw.mkdir(parents=True, exist_ok=True)
    with (raw / "fleet.csv").open("w", encoding="utf-8") as out:
        out.write("time,site,point,value\n")
        for hour in range(hours):
            stamp = f"2024-01-01 {hour:02d}:00"
            out.writelines(
                f"{stamp},M{site:06d},heat,{(site * 7 + hour) % 50}\n{stamp},M{site:06d},flow,{(site + hour) % 9}\n"
                for site in range(sites)
            )
    return Workspace.from_root(root)


def fleet_seconds(project: Path, tmp: Path, sites: int) -> tuple[float, int]:
    """Wall seconds of ingest over a fleet file of `sites` sites, and the observations it kept."""
    ws = fleet_root(tmp / f"fleet-{sites}", project, sites)
    start = time.perf_counter()
    (outcome,) = build(ws, [NAME], until="ingest", force=True)
    return time.perf_counter() - start, outcome.manifest.row_counts.get("observations", 0)
