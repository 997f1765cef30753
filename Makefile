# The kit's single entry point. `make reproduce` and `make test` do all the set-up on a fresh machine.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
export MPLBACKEND ?= Agg
export OMP_NUM_THREADS ?= 1
export OPENBLAS_NUM_THREADS ?= 1
export PYTHONDONTWRITEBYTECODE ?= 1
SIZE ?= full
# Both reproductions at full size by default (SIZE=quick AUTORESEARCH_SIZE=quick for a smoke run of a few minutes).
AUTORESEARCH_SIZE ?= $(SIZE)
OUT ?= reproductions/runs/latest

.PHONY: setup setup-system reproduce test lab index docs

## setup: create .venv and install the kit with the CPU torch pin (idempotent; re-runs only when pyproject changes)
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev,train,suite,scale]'
	touch $@

## setup-system: Debian packages for the real sandbox, browser and docker tests (needs root; CI runs it)
setup-system:
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends bubblewrap chromium >/dev/null

## reproduce: the CPU reproductions, headless, with a report at the end (SIZE=quick for a smoke run)
reproduce: setup
	$(BIN)/wmrl reproduce bandit --size $(SIZE) --out $(OUT)/bandit
	$(BIN)/wmrl reproduce autoresearch --size $(AUTORESEARCH_SIZE) --out $(OUT)/autoresearch
	@echo "Reports:"
	@echo "  toy bandit:    $(OUT)/bandit/bandit.ipynb, $(OUT)/bandit/metrics.json and figures"
	@echo "  AutoResearch:  $(OUT)/autoresearch/results.md, $(OUT)/autoresearch/summary.json and figures"

## test: notebooks clean and exported, notebook tests, lint, then pytest (its closing line is the count CI reads)
test: setup
	$(BIN)/nbdev-clean
	@test -z "$$(git status --porcelain -- nbs)" || { git status --short -- nbs; echo "nbs/ not clean: run nbdev-clean and commit"; exit 1; }
	$(BIN)/nbdev-export
	@test -z "$$(git status --porcelain -- wmrl)" || { git status --short -- wmrl; echo "wmrl/ differs from nbs/: never edit wmrl/ by hand; run nbdev-export and commit"; exit 1; }
	$(BIN)/nbdev-test --n-workers 2 --timing
	$(BIN)/ruff check wmrl tests reproductions docs
	rc=0; $(PY) -m pytest -q --durations=15 tests || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

## docs: the reading site in $(DOCS_OUT) (every chapter as a page, the teaching chapters executed, a start-here index)
DOCS_OUT ?= docs/_build
docs: setup
	$(PY) docs/build.py --out $(DOCS_OUT)

## lab: JupyterLab on the notebooks
lab: setup
	$(BIN)/jupyter lab nbs

## index: regenerate nbs/index.ipynb (the home page) from README.md; tests/test_readme.py checks they agree
index: setup
	$(PY) -c "import nbformat, pathlib; nb = nbformat.v4.new_notebook(); \
	nb.cells = [nbformat.v4.new_markdown_cell(pathlib.Path('README.md').read_text().rstrip(), id='readme')]; \
	nb.metadata['kernelspec'] = {'display_name': 'Python 3', 'language': 'python', 'name': 'python3'}; \
	nbformat.write(nb, 'nbs/index.ipynb')"
	$(BIN)/nbdev-clean --fname nbs/index.ipynb
