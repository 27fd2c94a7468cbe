"""Times inside the pipeline are int64 microseconds since 1970-01-01 UTC; these are its units."""

HOUR_US = 3_600_000_000
DAY_US = 24 * HOUR_US
