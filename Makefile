# fusebench: the user's commands. `make help` lists them.
#
# Python: the interpreter this is started with is used when it already has the dependencies
# (torch, asv, asv-runner): a GPU host's prepared environment, the container. Otherwise a
# virtual environment is created in $(VENV) from the hash-pinned requirements.lock.

SYSTEM_PYTHON ?= python3
VENV          ?= .venv
HAVE_DEPS     := $(shell $(SYSTEM_PYTHON) -c "import torch, asv, asv_runner" 2>/dev/null && echo yes)
PYTHON        ?= $(if $(HAVE_DEPS),$(SYSTEM_PYTHON),$(VENV)/bin/python)
DEPS          := $(if $(HAVE_DEPS),,$(VENV)/.installed)

OP            ?=
BACKENDS      ?=
DTYPES        ?=
QUICK         ?=
PYTEST_ARGS   ?=

BENCH_ARGS    := $(if $(OP),--ops $(OP)) $(if $(BACKENDS),--backends $(BACKENDS)) \
                 $(if $(DTYPES),--dtypes $(DTYPES)) $(if $(QUICK),--quick)

.PHONY: help bench test lint publish venv lock clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'
	@echo "  variables: OP=gelu|softmax|matmul BACKENDS=eager,torch,... DTYPES=float32,tf32,... QUICK=1"

bench: $(DEPS) ## run the suite on this machine, store asv results, print the summary, publish html/
	$(PYTHON) scripts/bench.py $(BENCH_ARGS)

test: $(DEPS) ## run the tests (CPU; tests marked gpu run where a GPU is)
	$(PYTHON) -m pytest $(PYTEST_ARGS)

lint: $(DEPS) ## check style (changes no file)
	$(PYTHON) -m ruff check .

publish: $(DEPS) ## build html/ from every stored result
	$(PYTHON) -c "import sys; from pathlib import Path; from fusebench import store; sys.exit(store.publish(Path('results'), Path('html')))"

venv: $(VENV)/.installed ## create the virtual environment from requirements.lock

$(VENV)/.installed: requirements.lock
	$(SYSTEM_PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --require-hashes -r requirements.lock
	touch $@

lock: ## regenerate requirements.lock from requirements.in (needs pip-tools)
	$(PYTHON) -m piptools compile --generate-hashes --allow-unsafe --strip-extras \
	    -o requirements.lock requirements.in

clean: ## remove caches and the unpublished quick results (never results/)
	rm -rf .asv/quick-results .asv/sweeps .pytest_cache

# ---- reports: the lecture's experiments, stored with their environment in reports/<machine>/ ----
# (pitfalls: the two timing mistakes; profile: torch.profiler per backend; mlp: training-step scaling.
#  Matmul scaling is an op of the suite: make bench OP=matmul.)

.PHONY: pitfalls profile mlp

pitfalls: $(DEPS) ## timing pitfalls: first call vs warmed up, host clock without sync vs CUDA events
	$(PYTHON) scripts/pitfalls.py

profile: $(DEPS) ## torch.profiler table per backend of OP (default gelu): kernels, launches, time
	$(PYTHON) scripts/profile_op.py --op $(or $(OP),gelu) $(if $(BACKENDS),--backends $(BACKENDS)) \
	    $(if $(DTYPES),--dtype $(DTYPES))

mlp: $(DEPS) ## MLP training-step time over steps, layers and batch size (linear growth)
	$(PYTHON) scripts/mlp.py
