"""New corpora by configuration alone: each test corpus is re-laid from a slice of a shipped one into a shape nobody
prepared for (headerless tab-separated files per sensor in epoch seconds, decimal commas, a time column named `ts`),
and builds through every stage without touching its raw bytes: the accounting holds, test is non-empty, the oracle
accomplishes every episode and preflight finds nothing."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.core.config import load_mapping
from pipeline.core.workspace import Workspace
from tests.helpers import RAW, REPO, TINY_XAI, copy_shared_configs, fill_drafted_mapping, xai_config

BELGRADE = ZoneInfo("Europe/Belgrade")
HEADER, *ROWS = [line.split(",") for line in TINY_XAI.splitlines()]
CLASSES = {  # what a user would write in the points table (the shipped xai4heat mapping's classes)
    "t_amb": ("Outside_Air_Temperature_Sensor", "DEG_C"),
    "t_ref": ("Hot_Water_Supply_Temperature_Setpoint", "DEG_C"),
    "t_sup_prim": ("Leaving_Hot_Water_Temperature_Sensor", "DEG_C"),
    "t_ret_prim": ("Entering_Hot_Water_Temperature_Sensor", "DEG_C"),
    "t_sup_sec": ("Leaving_Hot_Water_Temperature_Sensor", "DEG_C"),
    "t_ret_sec": ("Entering_Hot_Water_Temperature_Sensor", "DEG_C"),
    "e": ("Thermal_Energy_Sensor", "MegaW-HR"),
    "pe": ("Thermal_Power_Sensor", "KiloW"),
}


def cli(root: Path, *args: str):
    return CliRunner().invoke(main, ["--root", str(root), *args])


def project(root: Path, name: str, mapping: str, raw: dict[str, bytes]) -> Workspace:
    (root / "configs" / "corpora").mkdir(parents=True)
    copy_shared_configs(root)
    (root / "configs" / "corpora" / f"{name}.toml").write_text(mapping, encoding="utf-8")
    for rel, data in raw.items():
        (root / "data" / "raw" / name / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "data" / "raw" / name / rel).write_bytes(data)
    return Workspace.from_root(root)


def epoch_seconds(local: str) -> int:
    return int(dt.datetime.strptime(local, "%Y-%m-%d %H:%M:%S").replace(tzinfo=BELGRADE).timestamp())


def per_sensor_files() -> dict[str, bytes]:
    """One headerless, tab-separated file per sensor: Unix seconds, value (oldest first, as loggers write)."""
    return {
        f"{key}.tsv": "".join(f"{epoch_seconds(row[0])}\t{row[i]}\n" for row in reversed(ROWS)).encode()
        for i, key in enumerate(HEADER)
        if i
    }


PER_SENSOR_MAPPING = """name = "plant"
title = "One plant's sensors, a headerless tab-separated file each"

[time]
column = "ts"
format = "epoch_s"
row_order = "ascending"

[values]
kind = "file_per_stream"
files = "*.tsv"
file_pattern = '(?P<key>[a-z_]+)\\.tsv'
header = false
columns = ["ts", "value"]
delimiter = "\\t"
value_column = "value"
site = "plant"

[metadata]
kind = "table"
location = "config"
file = "points.csv"
key_column = "key"
point_class_column = "point_class"
label_column = "label"
unit_column = "unit"
"""


def points_table() -> str:
    return "key,point_class,label,unit\n" + "".join(
        f"{k},{c},{k.replace('_', ' ')} at the plant,{u}\n" for k, (c, u) in CLASSES.items()
    )


def check_built(root: Path, name: str, tmp_path: Path, raw_before: dict[str, bytes]) -> None:
    """Every stage built, raw bytes untouched, accounting, a non-empty test split, oracle 1.0, no preflight issue."""
    raw = root / "data" / "raw" / name
    assert {p.relative_to(raw).as_posix(): p.read_bytes() for p in raw.rglob("*") if p.is_file()} == raw_before
    artifacts = root / "artifacts" / name
    report = json.loads((artifacts / "ingest" / "report.json").read_text())
    assert report["observations"] + report["rejects"] == report["raw_value_cells"] > 0
    release = json.loads((artifacts / "release" / "release.json").read_text())
    assert release["splits"]["test"] > 0, release["splits"]
    audit = json.loads(cli(root, "audit", "--corpus", name, "--json").output)
    assert audit["controls"]["preflight_issue_count"] == 0
    out = tmp_path / "oracle.jsonl"
    played = cli(root, "run", "--corpus", name, "--split", "test", "--agent", "oracle", "--out", str(out), "--json")
    assert played.exit_code == 0, played.output
    assert json.loads(played.output)["accomplished_rate"] == 1.0


def build(root: Path, name: str) -> None:
    result = cli(root, "build", "--corpus", name)
    assert result.exit_code == 0, result.output


@pytest.mark.slow
def test_headerless_tab_separated_file_per_sensor_from_a_draft(tmp_path):
    """`corpus draft` guesses everything; filling the TODO point classes is all a user does before it builds."""
    root = tmp_path / "project"
    raw = per_sensor_files()
    project(root, "plant", "", raw)
    (root / "configs" / "corpora" / "plant.toml").unlink()
    drafted = cli(root, "corpus", "draft", str(root / "data" / "raw" / "plant"), "--name", "plant", "--json")
    assert drafted.exit_code == 0, drafted.output
    guesses = json.loads(drafted.output)["guesses"]
    assert (guesses["layout"], guesses["delimiter"], guesses["header"], guesses["time_format"]) == (
        "file_per_stream",
        "\t",
        False,
        "epoch_s",
    )
    points = root / "configs" / "corpora" / "plant" / "points.csv"
    assert points.read_text().count("TODO") == len(CLASSES)
    failed = cli(root, "build", "--corpus", "plant")
    assert failed.exit_code != 0 and "still say TODO" in failed.output
    fill_drafted_mapping(root / "configs" / "corpora" / "plant.toml")
    failed = cli(root, "build", "--corpus", "plant")
    assert failed.exit_code != 0 and "is TODO; write its Brick class" in failed.output
    lines = points.read_text().splitlines()
    filled = [lines[0]] + [
        ",".join([k, CLASSES[k][0], label, CLASSES[k][1], *rest])
        for k, _, label, _, *rest in (line.split(",") for line in lines[1:])
    ]
    points.write_text("\n".join(filled) + "\n")
    # the draft's guess that the heat energy only rises (a counter) waits for the user's check, in one line
    unchecked = cli(root, "build", "--corpus", "plant")
    assert unchecked.exit_code == 1 and "counter column 'counter' holds 'CHECK yes'" in unchecked.output
    assert unchecked.output.count("\n") == 1, unchecked.output
    assert [line.split(",")[0] for line in filled if "CHECK " in line] == ["e"]  # it is one (xai4heat's e)
    points.write_text("\n".join(filled).replace("CHECK ", "") + "\n")
    result = cli(root, "build", "--corpus", "plant")
    # every stage runs and the plant releases (issue 52: the split plans and the one-week commitment cap leave each
    # split rows of every commitment the gates ask for)
    assert result.exit_code == 0 and "plant        released" in result.output and "gates pass" in result.output, (
        result.output
    )
    assert "plant        tasks      info: " in result.output and "streams in no family" in result.output
    verbose = cli(root, "build", "--corpus", "plant", "--verbose")  # cached: the notes again, whole
    assert (
        "streams in no family: plant__t_ret_prim, plant__t_ret_sec, plant__t_sup_prim, plant__t_sup_sec"
        in verbose.output
    )
    audit = json.loads(cli(root, "audit", "--corpus", "plant", "--json").output)
    assert audit["controls"]["preflight_issue_count"] == 0 and audit["gates"]["commitment_mix"] == "pass"
    report = json.loads((root / "artifacts" / "plant" / "ingest" / "report.json").read_text())
    assert set(report["metadata_sha256"]) == {"points.csv"} and "points.csv" not in report["raw_sha256"]
    assert report["streams"] == len(CLASSES)
    inspect = json.loads(cli(root, "inspect", "tasks", "--corpus", "plant", "--json").output)
    assert inspect["streams_in_no_family"] == [
        "plant__t_ret_prim",
        "plant__t_ret_sec",
        "plant__t_sup_prim",
        "plant__t_sup_sec",
    ]
    assert inspect["streams_left_out"]["point_disambiguation"]["equipment_known"] > 0
    assert "equipment_known" not in inspect["streams_left_out"]["day_mean_lookup"]


@pytest.mark.parametrize("corpus", ["xai4heat", "hhw"])
def test_draft_guesses_the_shipped_mappings(tmp_path, corpus):
    root = tmp_path / "project"
    (root / "configs" / "corpora").mkdir(parents=True)
    copy_shared_configs(root)
    shutil.copytree(RAW / corpus, root / "data" / "raw" / corpus)
    before = {p.name: p.read_bytes() for p in (root / "data" / "raw" / corpus).rglob("*") if p.is_file()}
    result = cli(root, "corpus", "draft", str(root / "data" / "raw" / corpus), "--name", corpus, "--json")
    assert result.exit_code == 0, result.output
    guesses = json.loads(result.output)["guesses"]
    shipped = load_mapping(REPO / "configs" / "corpora" / f"{corpus}.toml")
    assert guesses["layout"] == shipped.values.kind and guesses["delimiter"] == shipped.values.delimiter
    assert guesses["header"] == shipped.values.header
    assert (guesses["time_column"], guesses["time_format"]) == (shipped.time.column, shipped.time.format)
    assert {p.name: p.read_bytes() for p in (root / "data" / "raw" / corpus).rglob("*") if p.is_file()} == before
    again = cli(root, "corpus", "draft", str(root / "data" / "raw" / corpus), "--name", corpus)
    assert again.exit_code != 0 and "already exists; pass --force" in again.output


@pytest.mark.slow
def test_decimal_comma_semicolon_file(tmp_path):
    root = tmp_path / "project"
    text = "".join(";".join(cell.replace(".", ",") for cell in row) + "\n" for row in [HEADER, *ROWS])
    raw = {"xai4heat_scada_L8.csv": text.encode()}
    mapping = xai_config(held_out_sites="[]").replace(
        'kind = "wide_csv"\n', 'kind = "wide_csv"\ndelimiter = ";"\ndecimal = ","\n'
    )
    project(root, "xai4heat", mapping, raw)
    build(root, "xai4heat")
    check_built(root, "xai4heat", tmp_path, raw)
    observations = json.loads((root / "artifacts" / "xai4heat" / "ingest" / "report.json").read_text())[
        "rejects_by_reason"
    ]
    assert "unparseable" not in observations  # every decimal-comma cell read as a number


@pytest.mark.slow
def test_time_column_named_like_an_internal_column(tmp_path):
    root = tmp_path / "project"
    raw = {"xai4heat_scada_L8.csv": TINY_XAI.replace("datetime,", "ts,", 1).encode()}
    project(root, "xai4heat", xai_config(held_out_sites="[]", column='"ts"'), raw)
    build(root, "xai4heat")
    check_built(root, "xai4heat", tmp_path, raw)


def test_headerless_needs_columns_and_names_the_fix(tmp_path):
    root = tmp_path / "project"
    project(root, "plant", PER_SENSOR_MAPPING.replace('columns = ["ts", "value"]\n', ""), per_sensor_files())
    result = cli(root, "build", "--corpus", "plant")
    assert (
        result.exit_code != 0 and "header = false needs columns" in result.output and "Traceback" not in result.output
    )


def test_todo_point_class_is_refused_by_row(tmp_path):
    root = tmp_path / "project"
    project(root, "plant", PER_SENSOR_MAPPING, per_sensor_files())
    (root / "configs" / "corpora" / "plant").mkdir()
    (root / "configs" / "corpora" / "plant" / "points.csv").write_text(
        points_table().replace("Thermal_Power_Sensor", "TODO")
    )
    result = cli(root, "build", "--corpus", "plant")
    assert result.exit_code != 0 and "points.csv: row 9: the point class of stream key 'pe' is TODO" in result.output


def test_nul_bytes_are_named_as_such(tmp_path):
    root = tmp_path / "project"
    raw = {"xai4heat_scada_L8.csv": TINY_XAI.encode()[:400] + b"\x00\x00\x00" + TINY_XAI.encode()[400:]}
    project(root, "xai4heat", xai_config(held_out_sites="[]"), raw)
    result = cli(root, "build", "--corpus", "xai4heat", "--until", "ingest")
    assert (
        result.exit_code != 0 and "holds NUL bytes" in result.output and "xai4heat_scada_L8.csv: line " in result.output
    )


def test_metadata_beside_the_mapping_joins_the_identity(tmp_path):
    root = tmp_path / "project"
    project(root, "plant", PER_SENSOR_MAPPING, per_sensor_files())
    folder = root / "configs" / "corpora" / "plant"
    folder.mkdir()
    (folder / "points.csv").write_text(points_table())
    assert cli(root, "build", "--corpus", "plant", "--until", "ingest").exit_code == 0
    key = json.loads((root / "artifacts" / "plant" / "ingest" / "manifest.json").read_text())["cache_key"]
    (folder / "points.csv").write_text(points_table().replace("pe at the plant", "heat power at the plant"))
    assert cli(root, "build", "--corpus", "plant", "--until", "ingest").exit_code == 0
    assert json.loads((root / "artifacts" / "plant" / "ingest" / "manifest.json").read_text())["cache_key"] != key
    shutil.rmtree(folder)
    result = cli(root, "build", "--corpus", "plant", "--until", "ingest")
    assert result.exit_code != 0 and 'location = "config"' in result.output


def test_every_cell_rejected_is_one_line_naming_the_cause(tmp_path):
    """A decimal-comma file read without `decimal` rejects every cell: the store says so, and why, in one line."""
    root = tmp_path / "project"
    text = "".join(";".join(cell.replace(".", ",") for cell in row) + "\n" for row in [HEADER, *ROWS[:200]])
    mapping = xai_config(held_out_sites="[]").replace('kind = "wide_csv"\n', 'kind = "wide_csv"\ndelimiter = ";"\n')
    project(root, "xai4heat", mapping, {"xai4heat_scada_L8.csv": text.encode()})
    result = cli(root, "build", "--corpus", "xai4heat")
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "ingest kept no observation" in result.output and 'values.decimal = ","' in result.output
    report = json.loads((root / "artifacts" / "xai4heat" / "ingest" / "report.json").read_text())
    assert report["rejects"] == report["raw_value_cells"] > 0  # nothing lost: every cell is a reject with its reason
    (root / "data" / "raw" / "xai4heat" / "xai4heat_scada_L8.csv").write_text(";".join(HEADER) + "\n")
    result = cli(root, "build", "--corpus", "xai4heat")
    assert (
        result.exit_code != 0
        and "the raw files hold no value cell" in result.output
        and "Traceback" not in result.output
    )
