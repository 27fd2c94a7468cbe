"""The shipped corpora ingest with the accounting the issue states, from the CLI."""

from __future__ import annotations

import json

import polars as pl
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.helpers import REPO

EXPECTED = {"xai4heat": (5, 1_477_208), "hhw": (10, 984_255)}


@pytest.fixture
def built(real_artifacts):
    return real_artifacts


@pytest.mark.parametrize("corpus", sorted(EXPECTED))
def test_inspect_ingest_json_accounting(built, corpus):
    result = CliRunner().invoke(
        main, ["--root", str(REPO), "--artifacts", str(built), "inspect", "ingest", "--corpus", corpus, "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    sites, cells = EXPECTED[corpus]
    assert summary["sites"] == sites
    assert summary["raw_value_cells"] == cells
    assert summary["observations"] + sum(summary["rejects_by_reason"].values()) == cells
    assert {"sites", "streams", "observations", "rejects_by_reason", "raw_value_cells"} <= set(summary)


def test_tables_sorted_by_full_key(built):
    for corpus in EXPECTED:
        obs = pl.read_parquet(built / corpus / "ingest" / "observations.parquet")
        assert obs.select(pl.struct("stream_id", "ts").is_unique().all()).item()
        assert obs.equals(obs.sort("stream_id", "ts"))
        assert obs["ts"].dtype == pl.Int64 and obs["value"].dtype == pl.Float64
        assert obs["value"].is_finite().all()


def test_hhw_missing_brick_columns_reported(built):
    report = json.loads((built / "hhw" / "ingest" / "report.json").read_text())
    absent = {(m["source"].split("/")[-1], m["column"]) for m in report["missing_columns"]}
    assert ("110hhw_system_data.csv", "sup1") in absent and ("55hhw_system_data.csv", "fire1") in absent
    assert len(absent) == 14
    assert report["rejects_by_reason"]["missing"] == 51_409 + 1_179


def test_xai4heat_streams_share_classes_by_loop(built):
    streams = pl.read_parquet(built / "xai4heat" / "ingest" / "streams.parquet")
    supply = streams.filter(
        (pl.col("site_id") == "L8") & (pl.col("point_class") == "Leaving_Hot_Water_Temperature_Sensor")
    )
    assert sorted(supply["equipment"]) == ["L8.primary_loop", "L8.secondary_loop"]
    sites = pl.read_parquet(built / "xai4heat" / "ingest" / "sites.parquet")
    assert sites.filter(pl.col("held_out"))["site_id"].to_list() == ["L17"]


def test_xai4heat_defects_each_have_a_reason(built):
    report = json.loads((built / "xai4heat" / "ingest" / "report.json").read_text())
    reasons = report["rejects_by_reason"]
    for reason in (
        "sentinel",
        "dropout_row",
        "missing",
        "nonexistent_local_time",
        "out_of_range",
        "zero_dropout",
    ):
        assert reasons.get(reason, 0) > 0, reason
    energy = pl.read_parquet(built / "xai4heat" / "ingest" / "observations.parquet").filter(
        pl.col("stream_id").str.ends_with("__e")
    )
    assert energy["value"].min() >= 0
    # no amount above the meter's max_rate (50 MWh per hour, configs/corpora/xai4heat.toml) over the hours since the
    # stream's reading before; amounts carried across a gap are kept (issue 51: a counter's jump bound is a rate)
    hours = pl.col("ts").diff().over("stream_id") / 3_600_000_000
    rates = energy.sort("stream_id", "ts").select(rate=pl.col("value") / hours).drop_nulls()["rate"]
    assert rates.max() <= 50.0 and energy["value"].max() > 50.0


def test_ingest_is_deterministic(built, tmp_path):
    result = CliRunner().invoke(main, ["--root", str(REPO), "--artifacts", str(tmp_path), "ingest", "--force"])
    assert result.exit_code == 0
    for corpus in EXPECTED:
        for path in sorted((built / corpus / "ingest").iterdir()):
            assert path.read_bytes() == (tmp_path / corpus / "ingest" / path.name).read_bytes(), path.name
