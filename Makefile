# fusebench: the user's commands. `make help` lists them. Each target is a thin call of the
# `fusebench` command, `$(PYTHON) -m fusebench <command> ...` (`fusebench --help` lists them).
#
# Python: the interpreter this is started with is used when it already has the dependencies
# (torch, asv, asv-runner): a GPU host's prepared environment, the container. Otherwise a
# virtual environment is created in $(VENV) from the hash-pinned requirements.lock and
# requirements-dev.lock (the tools of development: make test and make lint need them; the image
# has none of them).
#
# Values reach a command as arguments, never as shell code: a recipe passes each variable as
# $(call q,$(VAR)), one shell word (in single quotes when it holds anything a shell would read:
# a space, ' " ` $ \ ; & | < > ( ) { } [ ] * ? ~ ! # ^), so `make ab BASE='x;touch /tmp/p'` asks
# for the revision x;touch /tmp/p (a git branch may hold ; $ ( ) and backquotes, and CI passes
# branch names). A list (FROM, CMD, BUILD_OPTS, PYTEST_ARGS) is split at spaces by make, each word
# one argument ($(call words_q,...); FROM's globs are expanded by make). PYTHON, SYSTEM_PYTHON and
# VENV name the interpreter (make's own targets name them) and are used as given.
comma         := ,
lparen        := (
rparen        := )
hash          := \#
dollar        := $$
backslash     := $(strip \ )
SHELL_SPECIAL := ' " ` $(dollar) $(backslash) ; & | < > $(lparen) $(rparen) { } [ ] * ? ~ ! $(hash) ^
sq             = '$(subst ','\'',$(1))'
q              = $(if $(or $(filter-out 1,$(words $(1))),$(strip $(foreach c,$(SHELL_SPECIAL),$(findstring $(c),$(1))))),$(call sq,$(1)),$(1))
words_q        = $(foreach w,$(1),$(call q,$(w)))

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

SELECT_ARGS   := $(strip $(if $(OP),--ops $(call q,$(OP))) $(if $(BACKENDS),--backends $(call q,$(BACKENDS))) \
                 $(if $(DTYPES),--dtypes $(call q,$(DTYPES))) $(if $(SHAPES),--shapes $(call q,$(SHAPES))) \
                 $(if $(CONFIG),--config $(call q,$(CONFIG))) $(if $(QUICK),--quick))
BENCH_ARGS    := $(strip $(SELECT_ARGS) $(if $(ROUNDS),--rounds $(call q,$(ROUNDS))) $(if $(DIRTY),--dirty) \
                 $(if $(ENERGY),--energy $(call q,$(ENERGY))))

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
ENGINE_WHY     = $(eval ENGINE_WHY := $(if $(LOCAL),LOCAL=1,$(shell scripts/engine_check.sh $(call q,$(ENGINE)))))$(ENGINE_WHY)
ENGINE_OK     ?= $(if $(ENGINE_WHY),,1)
BUILD_WHY      = $(eval BUILD_WHY := $(if $(ENGINE_OK),,$(shell scripts/engine_check.sh --build $(call q,$(ENGINE)))))$(BUILD_WHY)

# podman and buildah build OCI images by default, which have no SHELL: the Dockerfile's RUN lines
# would run in /bin/sh, not bash. --format docker keeps it (docker's own format; podman, Apptainer
# and every registry read it).
BUILD_FORMAT   = $(if $(filter podman buildah,$(ENGINE_KIND)), --format docker)

# The GPUs: docker's NVIDIA runtime (--gpus) or podman's CDI devices. Rootless podman maps the
# caller's uid to itself (--userns=keep-id), so the files it writes are the caller's.
GPU_LIST       = $(filter-out all,$(subst $(comma), ,$(GPUS)))
GPU_FLAGS      = $(if $(filter podman,$(ENGINE_KIND)),$(if $(GPU_LIST),$(foreach g,$(GPU_LIST),--device $(call q,nvidia.com/gpu=$(g))),--device nvidia.com/gpu=all)$(if $(ROOTLESS), --userns=keep-id),--gpus $(if $(GPU_LIST),$(call sq,"device=$(GPUS)"),all))
# The suite's own --gpus: here GPUS as given; in the image every GPU the engine gave it.
# Paths are quoted and compared as whole strings (no word functions): a checkout path may hold spaces.
RESULTS_ARG    = $(if $(filter file,$(origin RESULTS)),,$(if $(subst $(CURDIR)/results,,$(RESULTS)),--results $(call sq,$(RESULTS))))
LOCAL_ARGS     = $(strip $(BENCH_ARGS) $(if $(GPUS),--gpus $(call q,$(GPUS))) $(RESULTS_ARG))
IMAGE_ARGS     = $(strip $(BENCH_ARGS) $(if $(GPUS),--gpus all))
ENGINE_RUN     = $(call q,$(ENGINE)) run --rm $(GPU_FLAGS) --user $(call q,$(RUN_AS)) \
                 --volume $(call sq,$(CURDIR)):/workspace --volume $(call sq,$(RESULTS)):/workspace/results \
                 --volume $(call sq,$(HTML)):/workspace/html --volume $(call q,$(CACHE_VOLUME)):/cache \
                 --env FUSEBENCH_IMAGE_DIGEST=$$($(call q,$(ENGINE)) image inspect --format '{{.Id}}' $(call q,$(IMAGE)))
IN_IMAGE       = mkdir -p $(call sq,$(RESULTS)) $(call sq,$(HTML)) && $(ENGINE_RUN)
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
	$(if $(ENGINE_OK)$(LOCAL),,@echo $(call sq,bench: $(ENGINE_WHY): running here$(comma) not in the image) >&2)

bench-local: $(DEPS) ## run the suite here, with the Python make picked (not in the image)
	$(strip $(FUSEBENCH) bench $(LOCAL_ARGS))

list: $(DEPS) ## print the cases make bench would measure here (same variables)
	$(strip $(FUSEBENCH) list $(SELECT_ARGS))

bench-image: image ## run the suite in the image (docker or podman, with the NVIDIA runtime or CDI)
	$(IN_IMAGE) $(call q,$(IMAGE)) $(IMAGE_ARGS)

image: ## build the pinned image (docker, podman or buildah), tagged fusebench:<git short sha>
	@$(if $(BUILD_WHY),echo $(call sq,image: $(BUILD_WHY)) >&2; exit 2,true)
	$(call q,$(ENGINE)) build$(BUILD_FORMAT) --build-arg $(call q,LOCK_HASH=$(LOCK_HASH)) --tag $(call q,$(IMAGE))$(if $(BUILD_OPTS), $(call words_q,$(BUILD_OPTS))) .

in-image: image ## run CMD='...' in the image, in the mounted checkout
	$(RUNS_IMAGE)
	$(IN_IMAGE) $(call q,$(IMAGE)) $(call words_q,$(CMD))

shell: image ## open a shell in the image, in the mounted checkout
	$(RUNS_IMAGE)
	$(IN_IMAGE) --interactive --tty $(call q,$(IMAGE)) bash

engine: ## say in one line which container engine is used here and what it is missing
	@scripts/engine_check.sh -v $(call q,$(ENGINE)) || true

image-archive: image ## the image as an OCI archive, fusebench-<sha>.oci.tar (for Apptainer: docs/container.md)
	$(if $(filter docker,$(ENGINE_KIND)),$(call q,$(ENGINE)) save --output $(call q,$(ARCHIVE)) $(call q,$(IMAGE)),$(if $(filter podman,$(ENGINE_KIND)),$(call q,$(ENGINE)) save --format oci-archive --output $(call q,$(ARCHIVE)) $(call q,$(IMAGE)),$(call q,$(ENGINE)) push $(call q,$(IMAGE)) $(call q,oci-archive:$(ARCHIVE))))

image-test: $(DEPS) ## build the Dockerfile on the CPU stand-in base with buildah and run it (root; CI)
	$(PYTHON) -m scripts.image_test

# make test: the fast tests (every test not marked slow), on TEST_JOBS workers; make test-slow: the
# integration tests marked slow, one at a time, each named as it starts (-v) and the slowest listed
# at the end. CI runs both.
test: $(DEPS) ## run the fast tests (CPU; tests marked gpu run where a GPU is; not those marked slow)
	$(PYTHON) -m pytest -m "not slow" $(foreach j,$(TEST_JOBS),$(if $(filter-out 0,$(j)),-n $(j) --dist loadfile)) $(call words_q,$(PYTEST_ARGS))

test-slow: $(DEPS) ## run the slow integration tests (real asv runs, pip, end to end, the browser)
	$(PYTHON) -m pytest -m slow -v --durations=15 $(call words_q,$(PYTEST_ARGS))

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
	@echo "venv: the fusebench command is $(VENV)/bin/fusebench (source $(VENV)/bin/activate puts it on PATH)"

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

# clean: also the worktrees `make bisect` and `make ab` made of this repository (those git lists under
# the cache's worktrees/; the extension builds beside them stay: minutes of work per commit). Only
# real folders inside the checkout are removed: a symbolic link (.asv -> elsewhere, which a commit
# can carry) is named and left as it is (fusebench/clean.py).
clean: ## remove caches, the unpublished quick results, make ab's sessions, make bisect's sessions and worktrees (never results/)
	@$(SYSTEM_PYTHON) -m fusebench.clean$(if $(BISECT_CACHE), --cache $(call q,$(BISECT_CACHE)))

# --- Profiling: make nsys / make trace (fusebench nsys capture, fusebench trace; nsys/README.md) -
# One pipeline: `fusebench nsys capture` checks nsys and the GPU, runs `nsys profile` of the
# driver and `nsys stats`, and writes the summary (it prints each nsys command as it runs it).
# NSYS: an nsys not on PATH. SHAPES: shape labels of the op's default grid (default: its nsys
# grid). CALLS: calls per range. The files are nsys/<op>-<machine>-<short sha>.* (the machine
# name comes from the GPU).

NSYS          ?= nsys
CALLS         ?=
PROFILE_ARGS   = $(call q,--op=$(OP))$(if $(BACKENDS), --backends $(call q,$(BACKENDS)))$(if $(SHAPES), --shapes $(call q,$(SHAPES)))$(if $(DTYPES), --dtypes $(call q,$(DTYPES)))$(if $(CALLS), --calls $(call q,$(CALLS)))$(if $(CONFIG), --config $(call q,$(CONFIG)))

.PHONY: nsys nsys-where nsys-local nsys-image trace

nsys: nsys-where $(call WAY,nsys) ## Nsight Systems timeline of one op (OP=gelu): in the image when an engine can, else here

nsys-where:
	$(if $(ENGINE_OK)$(LOCAL),,@echo $(call sq,nsys: $(ENGINE_WHY): running here$(comma) not in the image) >&2)

nsys-image: image ## make nsys in the image (the image's pinned Nsight Systems), nsys/ in the checkout
	$(IN_IMAGE) $(call q,$(IMAGE)) make nsys-local LOCAL=1 $(foreach v,OP BACKENDS SHAPES DTYPES CALLS CONFIG,$(call q,$(v)=$($(v))))

nsys-local: $(DEPS) ## make nsys here: a range per case, summary .md/.csv in nsys/
	$(FUSEBENCH) nsys capture $(PROFILE_ARGS) --nsys $(call q,$(NSYS))

trace: $(DEPS) ## torch.profiler Chrome trace of one op (OP=gelu), same range names, in nsys/ (no nsys needed)
	$(strip $(FUSEBENCH) trace $(PROFILE_ARGS))

# make ncu: Nsight Compute's counters of the same plan (fusebench ncu capture: ncu of the nsys
# driver, application replay, caches not flushed): DRAM bytes per call against the declared bytes,
# into nsys/<op>-<machine>-<short sha>-ncu.*; here, not in the image (it has no Nsight Compute).
# NCU: an ncu not on PATH (default: PATH, then the newest /opt/nvidia/nsight-compute/*/ncu).
NCU           ?= ncu

.PHONY: ncu
ncu: $(DEPS) ## Nsight Compute counters of one op (OP=gelu): DRAM bytes/call vs declared, L2 hit rate, in nsys/
	$(FUSEBENCH) ncu capture $(PROFILE_ARGS) --ncu $(call q,$(NCU))

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
	$(FUSEBENCH) preview --port $(call q,$(PORT))

compare: $(DEPS) ## regression gate: make compare BASE=<rev> [HEAD=<rev>] [FACTOR=1.04] [MACHINE=<name>, default this host] [HEAD_RESULTS=dir] [FORMAT=json|markdown]
	@test -n $(call q,$(BASE)) || { $(PYTHON) -c 'import sys; from fusebench.storage.results import print_compare_hint as h; h(sys.argv[1])' $(call q,$(MACHINE)); exit 2; }
	$(if $(FORMAT),@)$(FUSEBENCH) compare $(call q,--base=$(BASE)) $(call q,--head=$(HEAD))$(if $(FACTOR), --factor $(call q,$(FACTOR)))$(if $(MACHINE), --machine $(call q,$(MACHINE)))$(if $(CONFIG), --config $(call q,$(CONFIG)))$(if $(BASE_RESULTS), --base-results $(call q,$(BASE_RESULTS)))$(if $(HEAD_RESULTS), --head-results $(call q,$(HEAD_RESULTS)))$(if $(FORMAT), --format $(call q,$(FORMAT)))

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
AB_ARGS        = $(if $(filter-out file default,$(origin HEAD)), $(call q,--head=$(HEAD)))$(if $(ALL), --all)$(if $(OP), --ops $(call q,$(OP)))$(if $(BACKENDS), --backends $(call q,$(BACKENDS)))$(if $(DTYPES), --dtypes $(call q,$(DTYPES)))$(if $(SHAPES), --shapes $(call q,$(SHAPES)))$(if $(FORMAT), --format $(call q,$(FORMAT)))$(if $(AB_OUT), --output $(call q,$(AB_OUT)))$(if $(NO_COUNTERS), --no-counters)
CACHE_ARG      = $(if $(BISECT_CACHE), --cache $(call q,$(BISECT_CACHE)))

.PHONY: ab

ab: $(DEPS) ## did my change make it slower? make ab BASE=<rev> [HEAD=<rev>] [ALL=1]: both measured side by side on this GPU
	@test -n $(call q,$(BASE)) || { echo "ab: give BASE=<rev> (e.g. make ab BASE=origin/main; HEAD= defaults to the checkout)" >&2; exit 2; }
	$(FUSEBENCH) ab $(call q,--base=$(BASE))$(CACHE_ARG)$(AB_ARGS)

# bisect: the first commit on BAD's first-parent line after GOOD that made the cases CASE
# (op/backend/shape/dtype, comma-separated) slower, each commit measured by its own code in its
# own worktree (docs/bisect.md); METRIC=device_time (default), device_time_cold, device_time_graph
# or wall_time (the CPU's). Exits 0 when one commit is named, 1 for a range or no regression.
GOOD          ?=
BAD           ?=
CASE          ?=
METRIC        ?=
# BISECT_CACHE: the worktrees and extension builds per commit (fusebench bisect --cache; default
# theirs: $XDG_CACHE_HOME or ~/.cache /fusebench/bisect, the checkout's .asv/cache without HOME);
# make clean removes the worktrees.
BISECT_CACHE  ?=

.PHONY: bisect

bisect: $(DEPS) ## which commit made a case slower: make bisect GOOD=<rev> BAD=<rev> CASE=op/backend/shape/dtype[,...]
	@test -n $(call q,$(GOOD)) -a -n $(call q,$(BAD)) -a -n $(call q,$(CASE)) || { echo "bisect: give GOOD=<rev> BAD=<rev> CASE=op/backend/shape/dtype (e.g. make bisect GOOD=HEAD~8 BAD=HEAD CASE=gelu/torch/1048576/float32; on a host without a GPU: make bisect GOOD=HEAD~8 BAD=HEAD CASE=gelu/torch/1048576/float32 METRIC=wall_time)" >&2; exit 2; }
	$(FUSEBENCH) bisect $(foreach c,$(subst $(comma), ,$(CASE)),$(call q,--case=$(c)))$(if $(METRIC), --metric $(call q,$(METRIC)))$(CACHE_ARG)$(if $(FACTOR), --factor $(call q,$(FACTOR)))$(if $(MACHINE), --machine $(call q,$(MACHINE)))$(if $(CONFIG), --config $(call q,$(CONFIG))) -- $(call q,$(GOOD)) $(call q,$(BAD))

plots: $(DEPS) ## bandwidth and speedup plots of each machine's latest results into plots/<machine>/ [MACHINE=<name>[,...]]
	$(FUSEBENCH) plots$(if $(MACHINE), --machines $(call q,$(MACHINE)))

# ---- reports: the lecture's experiments, stored with their environment in reports/<machine>/ ----
# (pitfalls: the two timing mistakes; profile: torch.profiler per backend; mlp: training-step scaling.
#  Matmul scaling is an op of the suite: make bench OP=matmul.)

.PHONY: pitfalls profile mlp

pitfalls: $(DEPS) ## timing pitfalls: first call vs warmed up, host clock without sync vs CUDA events
	$(FUSEBENCH) pitfalls

profile: $(DEPS) ## torch.profiler table per backend of OP (default gelu): kernels, launches, time
	$(FUSEBENCH) profile --op $(call q,$(or $(OP),gelu)) $(if $(BACKENDS),--backends $(call q,$(BACKENDS))) \
	    $(if $(DTYPES),--dtype $(call q,$(DTYPES)))

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
	@test -n $(call q,$(strip $(FROM))) || { echo "collect: give FROM=<folder>...: other hosts' results folders, or folders holding results/ and records/; globs allowed" >&2; exit 2; }
	$(FUSEBENCH) collect $(call words_q,$(foreach f,$(FROM),$(or $(wildcard $(f)),$(f))))$(if $(INTO), --into $(call q,$(INTO)))

slurm-test: $(DEPS) ## the Slurm array job on a real one-node Slurm here, then collect and compare (CI)
	PYTHON=$(call q,$(PYTHON)) scripts/slurm_test.sh
