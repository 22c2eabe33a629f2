# One command regenerates every table and figure (`make`); a second runs the tests (`make test`).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
KERNEL := agentrl-ch10
SETUP := $(VENV)/.setup-done
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
NB_TARGETS := $(patsubst notebooks/%.ipynb,nb-%,$(NOTEBOOKS))

.PHONY: all chapter beyond notebooks report setup test calibrate bench clean-venv $(NB_TARGETS)

all: notebooks report

# The virtual environment: pinned requirements, agentrl (editable), a Jupyter kernel inside the venv.
setup: $(SETUP)
$(SETUP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python (agentrl ch10)" >/dev/null
	$(PY) -c "import matplotlib.pyplot"  # build matplotlib's font cache here, not inside a notebook
	touch $@

# The chapter alone (notebooks 01-08) or what goes beyond it (09, 10), each followed by the report.
CHAPTER_NB := $(filter nb-01% nb-02% nb-03% nb-04% nb-05% nb-06% nb-07% nb-08%,$(NB_TARGETS))
BEYOND_NB := $(filter-out $(CHAPTER_NB),$(NB_TARGETS))
chapter: $(CHAPTER_NB)
	$(PY) -m agentrl.report
beyond: $(BEYOND_NB)
	$(PY) -m agentrl.report

# Every notebook, executed headlessly; each replaces its committed copy only if it succeeds.
notebooks: $(NB_TARGETS)
$(NB_TARGETS): nb-%: $(SETUP)
	$(PY) -m agentrl.notebook_runner notebooks/$*.ipynb

# The TinyAgent notebooks share the cached RL base, and later ones load the runs earlier ones train (from the run
# cache): build the base first and order the notebooks so that `make -j2` trains each thing once.
TINYAGENT_NB := $(filter-out nb-01% nb-02% nb-03% nb-04% nb-05%,$(NB_TARGETS))
$(TINYAGENT_NB): rl-base
nb-08_design_questions nb-09_seeds: $(filter nb-07_tinyagent_comparison,$(NB_TARGETS))

.PHONY: rl-base
rl-base: $(SETUP)
	$(PY) -c "import agentrl as arl; arl.make_rl_base(arl.build_tokenizer(arl.make_tasks('all')))"

# REPRODUCTION.md: the chapter's tables beside ours, written from the executed notebooks.
report: $(NB_TARGETS)
	$(PY) -m agentrl.report

test: $(SETUP)
	$(PY) -m pytest

calibrate: $(SETUP)
	$(PY) -m agentrl.calibrate

bench: $(SETUP)
	$(PY) -m agentrl.bench

clean-venv:
	rm -rf $(VENV)
