# telemetry-bench: `make build` regenerates the benchmark from data/raw, `make test` runs the suite.
# Both create the virtual environment in .venv/ first (nothing but Python 3.11 needed).
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
TB := $(BIN)/telemetry-bench

.PHONY: build test test-fast lint bench bench-scale verify clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "telemetry-bench needs Python 3.11; set PYTHON=/path/to/python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

build: $(STAMP)
	$(TB) build

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

bench-scale: $(STAMP)
	$(BIN)/python -m pipeline.bench_scale

verify: $(STAMP)
	$(TB) verify

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python -m pipeline.bench

clean:
	rm -rf $(VENV) artifacts/*/ingest artifacts/*/store artifacts/*/tasks artifacts/*/episodes artifacts/*/audit
