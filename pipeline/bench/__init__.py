"""Benchmarks: `make bench` (throughput, tools, runtime) and `make bench-scale`."""
