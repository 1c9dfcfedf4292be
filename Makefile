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

BENCH_ARGS    := $(strip $(if $(OP),--ops $(OP)) $(if $(BACKENDS),--backends $(BACKENDS)) \
                 $(if $(DTYPES),--dtypes $(DTYPES)) $(if $(QUICK),--quick))

# --- docker: the pinned image (Dockerfile) -----------------------------------------------------
# `make bench` runs the suite in the image when docker, its daemon, the NVIDIA container runtime
# and a GPU are here (scripts/docker_check.sh says which is missing), else here; LOCAL=1 forces
# here (set inside the image). IN_IMAGE runs any command in the image, in the mounted checkout:
#   $(IN_IMAGE) make nsys OP=gelu        (a target of its own wraps itself the same way)
# DOCKER_OK=1 skips the check (the tests print the exact docker commands with make -n).
DOCKER        ?= docker
IMAGE_NAME    ?= fusebench
IMAGE_TAG     ?= $(or $(shell git rev-parse --short=12 HEAD 2>/dev/null),dev)
IMAGE         ?= $(IMAGE_NAME):$(IMAGE_TAG)
LOCK_HASH     := $(firstword $(shell sha256sum requirements.lock 2>/dev/null))
RESULTS       ?= $(CURDIR)/results
HTML          ?= $(CURDIR)/html
CACHE_VOLUME  ?= fusebench-cache
GPUS          ?= all
RUN_AS        ?= $(shell id -u):$(shell id -g)
LOCAL         ?= $(FUSEBENCH_IN_IMAGE)
DOCKER_WHY     = $(eval DOCKER_WHY := $(if $(LOCAL),LOCAL=1,$(shell scripts/docker_check.sh $(DOCKER))))$(DOCKER_WHY)
DOCKER_OK     ?= $(if $(DOCKER_WHY),,1)

DOCKER_RUN     = $(DOCKER) run --rm --gpus $(GPUS) --user $(RUN_AS) \
                 --volume $(CURDIR):/workspace --volume $(RESULTS):/workspace/results \
                 --volume $(HTML):/workspace/html --volume $(CACHE_VOLUME):/cache \
                 --env FUSEBENCH_IMAGE_DIGEST=$$($(DOCKER) image inspect --format '{{.Id}}' $(IMAGE))
IN_IMAGE       = mkdir -p $(RESULTS) $(HTML) && $(DOCKER_RUN)

.PHONY: help bench test lint publish venv lock clean bench-local bench-image image in-image shell

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'
	@echo "  variables: OP=gelu|softmax BACKENDS=eager,torch,... DTYPES=float32,... QUICK=1 LOCAL=1"

bench: ## run the suite (in the image with the GPUs when docker can, else here), store, publish html/
	$(if $(DOCKER_OK)$(LOCAL),,@echo "bench: $(DOCKER_WHY): running here, not in the image" >&2)
	@$(MAKE) --no-print-directory $(if $(DOCKER_OK),bench-image,bench-local)

bench-local: $(DEPS) ## run the suite here, with the Python make picked (not in the image)
	$(PYTHON) scripts/bench.py $(BENCH_ARGS)

bench-image: image ## run the suite in the image (needs docker and the NVIDIA runtime)
	$(IN_IMAGE) $(IMAGE) $(BENCH_ARGS)

image: ## build the pinned image (docker), tagged fusebench:<git short sha>
	$(DOCKER) build --build-arg LOCK_HASH=$(LOCK_HASH) --tag $(IMAGE) .

in-image: image ## run CMD='...' in the image, in the mounted checkout
	$(IN_IMAGE) $(IMAGE) $(CMD)

shell: image ## open a shell in the image, in the mounted checkout
	$(IN_IMAGE) --interactive --tty $(IMAGE) bash

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

lock: ## regenerate requirements.lock from requirements.in (needs pip-tools and PyPI; both torch builds)
	$(PYTHON) scripts/lock.py compile
	$(PYTHON) scripts/lock.py check

clean: ## remove caches and the unpublished quick results (never results/)
	rm -rf .asv/quick-results .asv/sweeps .pytest_cache
