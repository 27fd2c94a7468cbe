# telemetry-bench: `make build` regenerates the benchmark from data/raw, `make test` runs the suite.
# Both create the virtual environment in .venv/ first (nothing but Python 3.11 needed).
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
TB := $(BIN)/telemetry-bench

.PHONY: build test test-fast lint bench bench-scale verify clean venv report traces

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

# The reference agents (oracle, the audit's shortcut controller, noop) on the test split of every built corpus.
traces: $(STAMP)
	@mkdir -p artifacts/traces
	@for release in artifacts/*/release; do corpus=$$(basename $$(dirname $$release)); \
	  test -s $$release/test.jsonl || { echo "$$corpus: no released test episodes, no traces"; continue; }; \
	  for agent in oracle controller noop; do \
	    $(TB) run --corpus $$corpus --split test --agent $$agent --out artifacts/traces/$$corpus-$$agent.jsonl > /dev/null || exit 1; \
	    echo "artifacts/traces/$$corpus-$$agent.jsonl"; \
	  done; done

# artifacts/report.html over every built corpus and every trace under artifacts/traces/ (the reference traces first if none).
report: $(STAMP)
	@ls artifacts/traces/*.jsonl > /dev/null 2>&1 || $(MAKE) --no-print-directory traces
	$(TB) report $$(for trace in artifacts/traces/*.jsonl; do printf -- '--trace %s ' "$$trace"; done) --out artifacts/report.html

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python -m pipeline.bench

clean:
	rm -rf $(VENV) artifacts/*/ingest artifacts/*/store artifacts/*/tasks artifacts/*/episodes artifacts/*/audit
