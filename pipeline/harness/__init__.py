"""Harness: build orchestration, schemas export, playing and reading traces, evaluation, the gym API, the episodes
inspector."""
