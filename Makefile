# fusebench: the user's commands. `make help` lists them. Each target is a thin call of the
# `fusebench` command, `$(PYTHON) -m fusebench <command> ...` (`fusebench --help` lists them).
#
# Python: the interpreter this is started with is used when it already has the dependencies
# (torch, asv, asv-runner): a GPU host's prepared environment, the container. Otherwise a
# virtual environment is created in $(VENV) from the hash-pinned requirements.lock and
# requirements-dev.lock (the tools of development: make test and make lint need them; the image
# has none of them).

SYSTEM_PYTHON ?= python3
VENV          ?= .venv
# The Pythons requirements.lock is made for (scripts/lock.py PYTHONS, pyproject.toml, README).
LOCK_PYTHONS  := 3.11 3.12 3.13
HAVE_DEPS     := $(shell $(SYSTEM_PYTHON) -c "import torch, asv, asv_runner" 2>/dev/null && echo yes)
PYTHON        ?= $(if $(HAVE_DEPS),$(SYSTEM_PYTHON),$(VENV)/bin/python)
DEPS          := $(if $(HAVE_DEPS),,$(VENV)/.installed)

FUSEBENCH      = $(PYTHON) -m fusebench
OP            ?=
BACKENDS      ?=
DTYPES        ?=
SHAPES        ?=
CONFIG        ?=
QUICK         ?=
ROUNDS        ?=
DIRTY         ?=
# ENERGY=all: an energy top-up window for every case (default: each op's headline and largest shapes)
ENERGY        ?=
PYTEST_ARGS   ?=
# make test's workers (pytest-xdist, one test file to a worker): 2 on a host without an NVIDIA GPU
# (the CI machine's cores); on a GPU host, or where xdist is not installed, the tests run one at a
# time in pytest's own process, so that a test marked gpu never times a kernel beside another test.
# TEST_JOBS=0: one at a time anywhere.
TEST_JOBS     ?= $(if $(shell nvidia-smi -L 2>/dev/null),0,$(if $(shell $(PYTHON) -c "import xdist" 2>/dev/null && echo yes),2,0))
# REFERENCE=1: make venv also installs the reference backends' libraries (liger, quack, flaggems),
# the optional group requirements-reference.lock, with --no-deps over requirements.lock.
REFERENCE     ?=

SELECT_ARGS   := $(strip $(if $(OP),--ops $(OP)) $(if $(BACKENDS),--backends $(BACKENDS)) \
                 $(if $(DTYPES),--dtypes $(DTYPES)) $(if $(SHAPES),--shapes $(SHAPES)) \
                 $(if $(CONFIG),--config $(CONFIG)) $(if $(QUICK),--quick))
BENCH_ARGS    := $(strip $(SELECT_ARGS) $(if $(ROUNDS),--rounds $(ROUNDS)) $(if $(DIRTY),--dirty) \
                 $(if $(ENERGY),--energy $(ENERGY)))

# --- the pinned image (Dockerfile), with docker, podman or buildah --------------------------------
# CONTAINER: the engine, docker, podman or buildah (or a path to one); by default the first of them
# on PATH (scripts/engine_check.sh --find). `make bench` runs the suite in the image when the engine
# can run it with the GPUs (docker: daemon, NVIDIA container runtime, --gpus; podman, rootless too:
# the NVIDIA CDI spec, --device nvidia.com/gpu=all), else here, saying in one line which engine was
# found and what is missing (`make engine` prints that line); LOCAL=1 forces here (set inside the
# image). buildah builds the image (make image) but does not run it. IN_IMAGE runs any command in
# the image, in the mounted checkout:
#   $(IN_IMAGE) make nsys OP=gelu        (a target of its own wraps itself the same way)
# ENGINE_OK=1 skips the check (the tests print the exact commands with make -n). BUILD_OPTS: more
# options for the build (make image-test passes the stand-in's build args).
DOCKER        ?=
CONTAINER     ?= $(DOCKER)
ENGINE         = $(eval ENGINE := $(or $(CONTAINER),$(shell scripts/engine_check.sh --find)))$(ENGINE)
ENGINE_KIND    = $(notdir $(ENGINE))
IMAGE_NAME    ?= fusebench
IMAGE_TAG     ?= $(or $(shell git rev-parse --short=12 HEAD 2>/dev/null),dev)
IMAGE         ?= $(IMAGE_NAME):$(IMAGE_TAG)
LOCK_HASH     ?= $(firstword $(shell sha256sum requirements.lock 2>/dev/null))
BUILD_OPTS    ?=
RESULTS       ?= $(CURDIR)/results
HTML          ?= $(CURDIR)/html
CACHE_VOLUME  ?= fusebench-cache
# GPUS: empty (default): the engine gets every GPU and the suite uses one (GPU 0, one process);
# GPUS=all: every GPU, one worker process each (fusebench/measure/workers.py); GPUS=0,1: those GPUs (the
# engine gets only them, the suite in the image then uses all it sees). RESULTS: another results
# folder than results/ (records beside it, RESULTS-name with records), e.g. an A/A run's.
GPUS          ?=
RUN_AS        ?= $(shell id -u):$(shell id -g)
ROOTLESS      ?= $(filter-out 0,$(shell id -u))
ARCHIVE       ?= fusebench-$(IMAGE_TAG).oci.tar
LOCAL         ?= $(FUSEBENCH_IN_IMAGE)
ENGINE_WHY     = $(eval ENGINE_WHY := $(if $(LOCAL),LOCAL=1,$(shell scripts/engine_check.sh $(ENGINE))))$(ENGINE_WHY)
ENGINE_OK     ?= $(if $(ENGINE_WHY),,1)
BUILD_WHY      = $(eval BUILD_WHY := $(if $(ENGINE_OK),,$(shell scripts/engine_check.sh --build $(ENGINE))))$(BUILD_WHY)

# podman and buildah build OCI images by default, which have no SHELL: the Dockerfile's RUN lines
# would run in /bin/sh, not bash. --format docker keeps it (docker's own format; podman, Apptainer
# and every registry read it).
BUILD_FORMAT   = $(if $(filter podman buildah,$(ENGINE_KIND)), --format docker)

# The GPUs: docker's NVIDIA runtime (--gpus) or podman's CDI devices. Rootless podman maps the
# caller's uid to itself (--userns=keep-id), so the files it writes are the caller's.
GPU_LIST       = $(filter-out all,$(subst $(comma), ,$(GPUS)))
comma         := ,
GPU_FLAGS      = $(if $(filter podman,$(ENGINE_KIND)),$(if $(GPU_LIST),$(foreach g,$(GPU_LIST),--device nvidia.com/gpu=$(g)),--device nvidia.com/gpu=all)$(if $(ROOTLESS), --userns=keep-id),--gpus $(if $(GPU_LIST),'"device=$(GPUS)"',all))
# The suite's own --gpus: here GPUS as given; in the image every GPU the engine gave it.
# Paths are quoted and compared as whole strings (no word functions): a checkout path may hold spaces.
RESULTS_ARG    = $(if $(filter file,$(origin RESULTS)),,$(if $(subst $(CURDIR)/results,,$(RESULTS)),--results '$(RESULTS)'))
LOCAL_ARGS     = $(strip $(BENCH_ARGS) $(if $(GPUS),--gpus $(GPUS)) $(RESULTS_ARG))
IMAGE_ARGS     = $(strip $(BENCH_ARGS) $(if $(GPUS),--gpus all))
ENGINE_RUN     = $(ENGINE) run --rm $(GPU_FLAGS) --user $(RUN_AS) \
                 --volume '$(CURDIR)':/workspace --volume '$(RESULTS)':/workspace/results \
                 --volume '$(HTML)':/workspace/html --volume $(CACHE_VOLUME):/cache \
                 --env FUSEBENCH_IMAGE_DIGEST=$$($(ENGINE) image inspect --format '{{.Id}}' $(IMAGE))
IN_IMAGE       = mkdir -p '$(RESULTS)' '$(HTML)' && $(ENGINE_RUN)
RUNS_IMAGE     = @$(if $(filter buildah,$(ENGINE_KIND)),echo "$@: buildah builds the image but does not run it: CONTAINER=docker or podman" >&2; exit 2,true)
# $(call WAY,bench): bench-image or bench-local, as a prerequisite chosen when the Makefile is read,
# and only when the target is asked for (the engine check is not run for `make test`). No
# recursive make: a failure is the script's one line and make's one `make: *** ... Error` line
# (GNU make prints that for any failing recipe), not a second `make[1]: *** ...` line.
WAY            = $(if $(filter $(1),$(MAKECMDGOALS)),$(if $(ENGINE_OK),$(1)-image,$(1)-local))

.PHONY: help bench list test test-slow lint venv lock clean bench-where bench-local bench-image image in-image shell \
        engine image-archive image-test

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'
	@echo "  variables: OP=<op> (make list: the ops) BACKENDS=eager,torch,... DTYPES=float32,tf32,... SHAPES=4096x4096,..."
	@echo "             QUICK=1 ROUNDS=3 DIRTY=1 ENERGY=all LOCAL=1 REFERENCE=1 CONFIG=cases.yaml (default fusebench.yaml)"
	@echo "  all GPUs:  GPUS=all or GPUS=0,1 (one worker per GPU) RESULTS=<dir> (another results folder)"
	@echo "  profiling: OP=gelu SHAPES=16777216,... CALLS=20 NSYS=/path/to/nsys NCU=/path/to/ncu (make nsys, make trace, make ncu)"
	@echo "  site, gate: BASE=<rev> HEAD=<rev> FACTOR=1.04 MACHINE=h200 PORT=8080 CDN=1 STRICT=1"
	@echo "  make ab:   BASE=<rev> HEAD=<rev> ALL=1 FORMAT=text|markdown|json AB_OUT=<file> NO_COUNTERS=1"
	@echo "  bisect:    GOOD=<rev> BAD=<rev> CASE=op/backend/shape/dtype METRIC=device_time|device_time_cold|"
	@echo "             device_time_graph|wall_time (a CPU measures wall_time only) BISECT_CACHE=<dir>"

bench: bench-where $(call WAY,bench) ## run the suite (in the image with the GPUs when an engine can, else here), store, publish html/

bench-where:
	$(if $(ENGINE_OK)$(LOCAL),,@echo "bench: $(ENGINE_WHY): running here, not in the image" >&2)

bench-local: $(DEPS) ## run the suite here, with the Python make picked (not in the image)
	$(strip $(FUSEBENCH) bench $(LOCAL_ARGS))

list: $(DEPS) ## print the cases make bench would measure here (same variables)
	$(strip $(FUSEBENCH) list $(SELECT_ARGS))

bench-image: image ## run the suite in the image (docker or podman, with the NVIDIA runtime or CDI)
	$(IN_IMAGE) $(IMAGE) $(IMAGE_ARGS)

image: ## build the pinned image (docker, podman or buildah), tagged fusebench:<git short sha>
	@$(if $(BUILD_WHY),echo "image: $(BUILD_WHY)" >&2; exit 2,true)
	$(ENGINE) build$(BUILD_FORMAT) --build-arg LOCK_HASH=$(LOCK_HASH) --tag $(IMAGE)$(if $(BUILD_OPTS), $(BUILD_OPTS)) .

in-image: image ## run CMD='...' in the image, in the mounted checkout
	$(RUNS_IMAGE)
	$(IN_IMAGE) $(IMAGE) $(CMD)

shell: image ## open a shell in the image, in the mounted checkout
	$(RUNS_IMAGE)
	$(IN_IMAGE) --interactive --tty $(IMAGE) bash

engine: ## say in one line which container engine is used here and what it is missing
	@scripts/engine_check.sh -v $(ENGINE) || true

image-archive: image ## the image as an OCI archive, fusebench-<sha>.oci.tar (for Apptainer: docs/container.md)
	$(if $(filter docker,$(ENGINE_KIND)),$(ENGINE) save --output $(ARCHIVE) $(IMAGE),$(if $(filter podman,$(ENGINE_KIND)),$(ENGINE) save --format oci-archive --output $(ARCHIVE) $(IMAGE),$(ENGINE) push $(IMAGE) oci-archive:$(ARCHIVE)))

image-test: $(DEPS) ## build the Dockerfile on the CPU stand-in base with buildah and run it (root; CI)
	$(PYTHON) -m scripts.image_test

# make test: the fast tests (every test not marked slow), on TEST_JOBS workers; make test-slow: the
# integration tests marked slow, one at a time, each named as it starts (-v) and the slowest listed
# at the end. CI runs both.
test: $(DEPS) ## run the fast tests (CPU; tests marked gpu run where a GPU is; not those marked slow)
	$(PYTHON) -m pytest -m "not slow" $(foreach j,$(TEST_JOBS),$(if $(filter-out 0,$(j)),-n $(j) --dist loadfile)) $(PYTEST_ARGS)

test-slow: $(DEPS) ## run the slow integration tests (real asv runs, pip, end to end, the browser)
	$(PYTHON) -m pytest -m slow -v --durations=15 $(PYTEST_ARGS)

lint: $(DEPS) ## check style (changes no file)
	$(PYTHON) -m ruff check .

venv: $(VENV)/.installed $(if $(REFERENCE),$(VENV)/.reference) ## create the virtual environment from requirements.lock and requirements-dev.lock (REFERENCE=1: and the reference backends' libraries)

# The runtime lock and the tools of development's lock (pytest, ruff, hadolint: make test, make lint)
# in one pip command: with --require-hashes pip refuses a dependency that neither file pins.
$(VENV)/.installed: requirements.lock requirements-dev.lock
	@v=$$($(SYSTEM_PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); \
	case " $(LOCK_PYTHONS) " in *" $$v "*) ;; *) echo "venv: $(SYSTEM_PYTHON) is Python $${v:-?}; \
	requirements.lock is for Python $(LOCK_PYTHONS) (give SYSTEM_PYTHON=python3.12)" >&2; exit 2;; esac
	$(SYSTEM_PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --require-hashes -r requirements.lock -r requirements-dev.lock
	$(VENV)/bin/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

# --no-deps: the group pins every runtime dependency itself and must not bring another torch or triton.
$(VENV)/.reference: $(VENV)/.installed requirements-reference.lock
	$(VENV)/bin/python -m pip install --quiet --no-deps --require-hashes -r requirements-reference.lock
	touch $@

lock: ## regenerate requirements.lock, requirements-reference.lock and requirements-dev.lock (needs pip-tools and PyPI; both torch builds)
	$(PYTHON) -m scripts.lock compile
	$(PYTHON) -m scripts.lock check
	$(PYTHON) -m scripts.lock reference
	$(PYTHON) -m scripts.lock reference --check
	$(PYTHON) -m scripts.lock dev
	$(PYTHON) -m scripts.lock dev --check

# clean: also the worktrees `make bisect` made of this repository (those git lists under
# $(BISECT_CACHE)/worktrees/; the extension builds beside them stay: minutes of work per commit).
clean: ## remove caches, the unpublished quick results, make ab's sessions, make bisect's sessions and worktrees (never results/)
	rm -rf .asv/quick-results .asv/partial-results .asv/partial-quick-results .asv/dirty-results \
	    .asv/quick-records .asv/partial-records .asv/partial-quick-records .asv/dirty-records \
	    .asv/sweeps .asv/ab bisect .pytest_cache
	@git worktree list --porcelain 2>/dev/null | sed -n 's/^worktree //p' | while IFS= read -r tree; do \
	    case "$$tree" in '$(BISECT_TREES)'/*) git worktree remove --force "$$tree" && \
	        echo "clean: removed the bisect worktree $$tree";; esac; done; git worktree prune 2>/dev/null || true

# --- Profiling: make nsys / make trace (fusebench nsys capture, fusebench trace; nsys/README.md) -
# One pipeline: `fusebench nsys capture` checks nsys and the GPU, runs `nsys profile` of the
# driver and `nsys stats`, and writes the summary (it prints each nsys command as it runs it).
# NSYS: an nsys not on PATH. SHAPES: shape labels of the op's default grid (default: its nsys
# grid). CALLS: calls per range. The files are nsys/<op>-<machine>-<short sha>.* (the machine
# name comes from the GPU).

NSYS          ?= nsys
CALLS         ?=
PROFILE_ARGS   = --op=$(OP)$(if $(BACKENDS), --backends $(BACKENDS))$(if $(SHAPES), --shapes $(SHAPES))$(if $(DTYPES), --dtypes $(DTYPES))$(if $(CALLS), --calls $(CALLS))$(if $(CONFIG), --config $(CONFIG))

.PHONY: nsys nsys-where nsys-local nsys-image trace

nsys: nsys-where $(call WAY,nsys) ## Nsight Systems timeline of one op (OP=gelu): in the image when an engine can, else here

nsys-where:
	$(if $(ENGINE_OK)$(LOCAL),,@echo "nsys: $(ENGINE_WHY): running here, not in the image" >&2)

nsys-image: image ## make nsys in the image (the image's pinned Nsight Systems), nsys/ in the checkout
	$(IN_IMAGE) $(IMAGE) make nsys-local LOCAL=1 OP=$(OP) BACKENDS=$(BACKENDS) SHAPES=$(SHAPES) DTYPES=$(DTYPES) CALLS=$(CALLS) CONFIG=$(CONFIG)

nsys-local: $(DEPS) ## make nsys here: a range per case, summary .md/.csv in nsys/
	$(FUSEBENCH) nsys capture $(PROFILE_ARGS) --nsys $(NSYS)

trace: $(DEPS) ## torch.profiler Chrome trace of one op (OP=gelu), same range names, in nsys/ (no nsys needed)
	$(strip $(FUSEBENCH) trace $(PROFILE_ARGS))

# make ncu: Nsight Compute's counters of the same plan (fusebench ncu capture: ncu of the nsys
# driver, application replay, caches not flushed): DRAM bytes per call against the declared bytes,
# into nsys/<op>-<machine>-<short sha>-ncu.*; here, not in the image (it has no Nsight Compute).
# NCU: an ncu not on PATH (default: PATH, then the newest /opt/nvidia/nsight-compute/*/ncu).
NCU           ?= ncu

.PHONY: ncu
ncu: $(DEPS) ## Nsight Compute counters of one op (OP=gelu): DRAM bytes/call vs declared, L2 hit rate, in nsys/
	$(FUSEBENCH) ncu capture $(PROFILE_ARGS) --ncu $(NCU)

# --- The site, the plots and the regression gate -------------------------------------------------
# publish: asv publish + jQuery/flot/bootstrap from html/vendor/ (npm ci of site/package-lock.json
# into site/node_modules) so the site works offline; without npm it fails unless CDN=1.
# compare: exits 1 when a case of MACHINE (default: this host's) regressed (slower than its own
# limit: FACTOR, its drift in the committed A/A history, its noise between rounds; rounds
# separated) or newly fails between BASE and HEAD; 2 on an unknown rev, no results, or nothing judged.
# FORMAT=markdown|json prints the table for a PR comment or a CI artifact. publish: STRICT=1 exits 1 when a stored result will not
# be drawn (its commit off main's first-parent line). BASE_RESULTS / HEAD_RESULTS: the results
# folders of each side (default results/): the A/A check of a one-GPU and a GPUS=all run of one
# commit is make compare BASE=HEAD HEAD_RESULTS=<the second run's RESULTS>.
# Revisions (BASE, HEAD; bisect's GOOD, BAD and CASE) reach the command as --base=REV (bisect's
# after --): one starting with '-' is refused as an unknown revision, never read as an option.

PORT          ?= 8080
BASE          ?=
HEAD          ?= HEAD
FACTOR        ?=
MACHINE       ?=
CDN           ?=
STRICT        ?=
BASE_RESULTS  ?=
HEAD_RESULTS  ?=
FORMAT        ?=

.PHONY: publish preview compare plots

publish: $(DEPS) ## build html/ from every stored result (works offline; CDN=1 if npm is missing)
	$(strip $(FUSEBENCH) publish $(if $(CDN),--cdn) $(if $(STRICT),--strict))

preview: $(DEPS) ## serve html/ on http://localhost:PORT (PORT=8080; run make publish first)
	$(FUSEBENCH) preview --port $(PORT)

compare: $(DEPS) ## regression gate: make compare BASE=<rev> [HEAD=<rev>] [FACTOR=1.04] [MACHINE=<name>, default this host] [HEAD_RESULTS=dir] [FORMAT=json|markdown]
	@test -n "$(BASE)" || { $(PYTHON) -c "from fusebench.storage.results import print_compare_hint as h; h('$(MACHINE)')"; exit 2; }
	$(if $(FORMAT),@)$(FUSEBENCH) compare --base=$(BASE) --head=$(HEAD)$(if $(FACTOR), --factor $(FACTOR))$(if $(MACHINE), --machine $(MACHINE))$(if $(CONFIG), --config $(CONFIG))$(if $(BASE_RESULTS), --base-results $(BASE_RESULTS))$(if $(HEAD_RESULTS), --head-results $(HEAD_RESULTS))$(if $(FORMAT), --format $(FORMAT))

# ab: did a change make it slower? BASE and HEAD (default: the checkout, with its uncommitted
# changes) measured side by side on this GPU, each by its own code in its own worktree and
# process, in interleaved rounds (docs/ab/README.md). By default only the backends whose measured
# code differs; ALL=1 the whole grid; OP, BACKENDS, DTYPES, SHAPES narrow. FORMAT=markdown|json,
# AB_OUT=file (the verdict there, e.g. a PR comment). Exits 1 on a regression, 2 on bad input or
# nothing judged. Where ncu is here, each flagged case is profiled once per side and its note says
# why it moved (DRAM bytes, throughput, launches); NO_COUNTERS=1 skips that.
ALL           ?=
AB_OUT        ?=
NO_COUNTERS   ?=
AB_ARGS        = $(if $(filter-out file default,$(origin HEAD)), --head=$(HEAD))$(if $(ALL), --all)$(if $(OP), --ops $(OP))$(if $(BACKENDS), --backends $(BACKENDS))$(if $(DTYPES), --dtypes $(DTYPES))$(if $(SHAPES), --shapes $(SHAPES))$(if $(FORMAT), --format $(FORMAT))$(if $(AB_OUT), --output $(AB_OUT))$(if $(NO_COUNTERS), --no-counters)

.PHONY: ab

ab: $(DEPS) ## did my change make it slower? make ab BASE=<rev> [HEAD=<rev>] [ALL=1]: both measured side by side on this GPU
	@test -n "$(BASE)" || { echo "ab: give BASE=<rev> (e.g. make ab BASE=origin/main; HEAD= defaults to the checkout)" >&2; exit 2; }
	$(FUSEBENCH) ab --base=$(BASE) --cache '$(BISECT_CACHE)'$(AB_ARGS)

# bisect: the first commit on BAD's first-parent line after GOOD that made the cases CASE
# (op/backend/shape/dtype, comma-separated) slower, each commit measured by its own code in its
# own worktree (docs/bisect.md); METRIC=device_time (default), device_time_cold, device_time_graph
# or wall_time (the CPU's). Exits 0 when one commit is named, 1 for a range or no regression.
GOOD          ?=
BAD           ?=
CASE          ?=
METRIC        ?=
# BISECT_CACHE: the worktrees and extension builds per commit (fusebench bisect --cache); make clean
# removes the worktrees (git prints them by their resolved path).
BISECT_CACHE  ?= $(HOME)/.cache/fusebench/bisect
BISECT_TREES   = $(or $(realpath $(BISECT_CACHE)),$(abspath $(BISECT_CACHE)))/worktrees

.PHONY: bisect

bisect: $(DEPS) ## which commit made a case slower: make bisect GOOD=<rev> BAD=<rev> CASE=op/backend/shape/dtype[,...]
	@test -n "$(GOOD)" -a -n "$(BAD)" -a -n "$(CASE)" || { echo "bisect: give GOOD=<rev> BAD=<rev> CASE=op/backend/shape/dtype (e.g. make bisect GOOD=HEAD~8 BAD=HEAD CASE=gelu/torch/1048576/float32; on a host without a GPU: make bisect GOOD=HEAD~8 BAD=HEAD CASE=gelu/torch/1048576/float32 METRIC=wall_time)" >&2; exit 2; }
	$(FUSEBENCH) bisect $(foreach c,$(subst $(comma), ,$(CASE)),--case=$(c))$(if $(METRIC), --metric $(METRIC)) --cache '$(BISECT_CACHE)'$(if $(FACTOR), --factor $(FACTOR))$(if $(MACHINE), --machine $(MACHINE))$(if $(CONFIG), --config $(CONFIG)) -- $(GOOD) $(BAD)

plots: $(DEPS) ## bandwidth and speedup plots of each machine's latest results into plots/<machine>/ [MACHINE=<name>[,...]]
	$(FUSEBENCH) plots$(if $(MACHINE), --machines $(MACHINE))

# ---- reports: the lecture's experiments, stored with their environment in reports/<machine>/ ----
# (pitfalls: the two timing mistakes; profile: torch.profiler per backend; mlp: training-step scaling.
#  Matmul scaling is an op of the suite: make bench OP=matmul.)

.PHONY: pitfalls profile mlp

pitfalls: $(DEPS) ## timing pitfalls: first call vs warmed up, host clock without sync vs CUDA events
	$(FUSEBENCH) pitfalls

profile: $(DEPS) ## torch.profiler table per backend of OP (default gelu): kernels, launches, time
	$(FUSEBENCH) profile --op $(or $(OP),gelu) $(if $(BACKENDS),--backends $(BACKENDS)) \
	    $(if $(DTYPES),--dtype $(DTYPES))

mlp: $(DEPS) ## MLP training-step time over steps, layers and batch size (linear growth)
	$(FUSEBENCH) mlp

# --- A fleet: results of many hosts into results/ (fusebench/storage/collect.py; deploy/ runs the hosts) ---
# FROM: results folders (or folders holding results/ and records/), space-separated, globs allowed:
#   make collect FROM='fleet/*'
# Copies what results/ and records/ lack, never overwrites; a conflict (the same commit and machine
# with different figures) or an unreadable file refuses the whole collect (exit 1 / 2, nothing written).

# INTO: another destination than results/ (records beside it). make slurm-test: the Slurm array
# job on a one-node Slurm started here (scripts/slurm_test.sh; root, Debian's slurm-wlm and munge).

FROM          ?=
INTO          ?=

.PHONY: collect slurm-test

collect: $(DEPS) ## merge results folders of other hosts into results/: make collect FROM='dir1 dir2' [INTO=dir]
	@test -n "$(FROM)" || { echo "collect: give FROM=<folder>...: other hosts' results folders, or folders holding results/ and records/; globs allowed" >&2; exit 2; }
	$(FUSEBENCH) collect $(FROM)$(if $(INTO), --into $(INTO))

slurm-test: $(DEPS) ## the Slurm array job on a real one-node Slurm here, then collect and compare (CI)
	PYTHON=$(PYTHON) scripts/slurm_test.sh
