"""make bench's fleet file (issue 53): many site ids in one long CSV ingest as one site each, two streams per site,
every reading kept; `make bench` times it at 100,000 sites (here a few hundred, untimed)."""

from __future__ import annotations

import polars as pl

from pipeline.bench.fleet import fleet_seconds
from tests.helpers import REPO


def test_a_fleet_file_ingests_every_site(tmp_path):
    seconds, observations = fleet_seconds(REPO, tmp_path, 300)
    assert seconds > 0 and observations == 300 * 2 * 2  # sites x hours x points
    ingest = tmp_path / "fleet-300" / "artifacts" / "fleet" / "ingest"
    sites = pl.read_parquet(ingest / "sites.parquet")
    assert sites.height == 300 and sites["site_id"].str.starts_with("M").all()
    assert pl.read_parquet(ingest / "rejects.parquet").height == 0
