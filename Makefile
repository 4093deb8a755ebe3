# The two commands of the README:
#   make book   set up .venv, regenerate every figure (Snakemake), build the HTML book
#   make test   set up .venv, unit tests + nbval over notebooks/ + strict book build
# Both work on a fresh Debian machine with Python 3.11 (no conda).

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
CORES ?= 2
BOOK_FLAGS := -W -n --keep-going

.PHONY: book figures test check browser slurm clean help

help:
	@echo "make book     regenerate every figure (Snakemake) and build the book into _build/html"
	@echo "make figures  regenerate the figures only"
	@echo "make test     unit tests, nbval over notebooks/, strict book build and browser checks"
	@echo "make check    the quick loop: lint (ruff) and the unit tests, under a minute"
	@echo "make clean    remove _build/ and artifacts/ (keeps .venv)"

# (Re)install when pyproject.toml changes; the venv is created once.
$(INSTALLED): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

# A run that regenerated every figure records its wall times in
# benchmarks/results/figures-run.json (the reproducibility page shows them).
figures: $(INSTALLED)
	@start=$$(date +%s.%N) && $(BIN)/snakemake --cores $(CORES) && \
	$(BIN)/python -m qkov_tools record --since $$start

book: figures
	$(BIN)/jupyter-book build . $(BOOK_FLAGS)

# A passing run records its wall time in benchmarks/results/test-run.json (shown on the
# reproducibility page).
test: $(INSTALLED) browser slurm
	@start=$$(date +%s.%N) && $(BIN)/ruff check . && $(BIN)/pytest && \
	$(BIN)/python -m qkov_tools record-test --since $$start

# The quick loop while changing the code: lint, then the unit tier (tests/conftest.py says
# which tests are which; `pytest -m notebook`, `-m book`, ... run the others).
check: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/pytest -m unit -q

# The browser checks render the book in Debian's headless Chromium; nothing downloads a browser.
browser:
	@command -v chromium >/dev/null && exit 0; \
	if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends chromium >/dev/null; \
	else \
		echo "The browser checks need Debian's chromium: sudo apt-get install chromium" >&2; \
	fi

# tests/test_slurm.py stands up a single-node SLURM on localhost from Debian's packages (it
# skips, saying why, where they are missing and cannot be installed).
slurm:
	@command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
		&& command -v sbatch >/dev/null && exit 0; \
	if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends munge slurmctld slurmd slurm-client >/dev/null; \
	else \
		echo "The SLURM test needs: sudo apt-get install munge slurmctld slurmd slurm-client" >&2; \
	fi

clean:
	rm -rf _build artifacts .snakemake
