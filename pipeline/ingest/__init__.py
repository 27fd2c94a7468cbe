"""Ingest: raw telemetry and metadata -> normalized Parquet tables with full accounting."""
