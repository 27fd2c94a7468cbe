"""What `inspect store` shows: counts, quality distribution, thresholds."""

from __future__ import annotations

from pipeline.core.config import select_corpora
from pipeline.core.manifest import require_manifest
from pipeline.core.workspace import Workspace
from pipeline.ingest.api import ingest_summary
from pipeline.store.reader import STORE_FILE, open_store


def store_summary(ws: Workspace, corpus: str) -> dict:
    select_corpora(ws, [corpus])
    folder = ws.stage_dir(corpus, "store")
    manifest = require_manifest(folder, "store")
    summary = {k: v for k, v in ingest_summary(ws, corpus).items() if k != "missing_columns"}
    con = open_store(folder / STORE_FILE)
    try:
        quality = {
            "streams": dict(con.execute("SELECT quality_band, count(*) FROM quality GROUP BY 1 ORDER BY 1").fetchall()),
        }
        for period in ("day", "week", "month"):
            quality[f"{period} windows"] = dict(
                con.execute(
                    "SELECT quality_band, count(*) FROM aggregates WHERE period = ? GROUP BY 1 ORDER BY 1", [period]
                ).fetchall()
            )
        in_store = dict(con.execute("SELECT reason, count(*) FROM rejects GROUP BY 1").fetchall())
        coverage = con.execute(
            "SELECT quantile_cont(coverage, [0.1, 0.5, 0.9]) FROM aggregates WHERE period = 'week'"
        ).fetchone()[0]
    finally:
        con.close()
    summary.update(
        tables=manifest.row_counts,
        quality=quality,
        # The rejects table keeps only cells with a stream and a time (docs/store.md); name the ones ingest keeps alone.
        rejects_not_in_store={
            reason: n - in_store.get(reason, 0)
            for reason, n in summary["rejects_by_reason"].items()
            if n > in_store.get(reason, 0)
        },
        weekly_coverage_p10_p50_p90=[round(v, 4) for v in coverage],
        thresholds=manifest.details.get("thresholds", {}),
        logical_digests=manifest.logical_digests,
    )
    return summary
