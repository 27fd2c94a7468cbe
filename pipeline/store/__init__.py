"""Store: normalized tables -> the read-only DuckDB tool store and its deterministic Parquet exports."""
