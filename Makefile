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

.PHONY: help bench test lint venv lock clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'
	@echo "  variables: OP=gelu|softmax BACKENDS=eager,torch,... DTYPES=float32,... QUICK=1"
	@echo "             BASE=<rev> HEAD=<rev> FACTOR=1.05 MACHINE=h200 PORT=8080 CDN=1"

bench: $(DEPS) ## run the suite on this machine, store asv results, print the summary, publish html/
	$(PYTHON) scripts/bench.py $(BENCH_ARGS)

test: $(DEPS) ## run the tests (CPU; tests marked gpu run where a GPU is)
	$(PYTHON) -m pytest $(PYTEST_ARGS)

lint: $(DEPS) ## check style (changes no file)
	$(PYTHON) -m ruff check .

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

# --- The site, the plots and the regression gate -------------------------------------------------
# publish: asv publish + jQuery/flot/bootstrap from html/vendor/ (npm ci of site/package-lock.json
# into site/node_modules) so the site works offline; without npm it fails unless CDN=1.
# compare: exits 1 when a case of MACHINE (default: this host's) became slower than
# FACTOR x (1 + its noise) or newly fails between BASE and HEAD; 2 on an unknown rev or no results.

PORT          ?= 8080
BASE          ?=
HEAD          ?= HEAD
FACTOR        ?= 1.05
MACHINE       ?=
CDN           ?=

.PHONY: publish preview compare plots

publish: $(DEPS) ## build html/ from every stored result (works offline; CDN=1 if npm is missing)
	$(PYTHON) scripts/publish.py $(if $(CDN),--cdn)

preview: ## serve html/ on http://localhost:PORT (PORT=8080; run make publish first)
	@test -f html/index.json || { echo "preview: html/ has no site; run make publish first"; exit 2; }
	$(SYSTEM_PYTHON) -m http.server --bind 127.0.0.1 --directory html $(PORT)

compare: $(DEPS) ## regression gate: make compare BASE=<rev> [HEAD=<rev>] [FACTOR=1.05] [MACHINE=h200]
	@test -n "$(BASE)" || { echo "compare: give BASE=<git rev> (e.g. make compare BASE=HEAD~1)"; exit 2; }
	$(PYTHON) scripts/compare.py --base $(BASE) --head $(HEAD) --factor $(FACTOR) $(if $(MACHINE),--machine $(MACHINE))

plots: $(DEPS) ## bandwidth and speedup plots of each machine's latest results into plots/<machine>/
	$(PYTHON) scripts/plots.py
