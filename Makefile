# Every target is documented in README.md. Scripts live in hack/.
SHELL := /bin/bash
.DEFAULT_GOAL := help

include hack/versions.env
CACHE_DIR ?= $(or $(PJ_CACHE_DIR),$(HOME)/.cache/paralleljob-operator)
# The pinned kubectl comes first, whatever else the machine has on PATH.
export PATH := $(CACHE_DIR)/kubernetes-$(KUBERNETES_VERSION)/bin:$(PATH)

VENV ?= .venv
PYTHON := $(VENV)/bin/python
KUBECONFIG ?= $(CURDIR)/.cluster/kubeconfig
export KUBECONFIG

.PHONY: help prereqs venv build cluster cluster-down cluster-restart run lint unit test chaos

help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

prereqs: ## Install every Debian package a target needs (hack/prereqs.txt; idempotent)
	@hack/install-prereqs.sh

$(VENV)/.installed: pyproject.toml requirements.lock VERSION
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip==26.3
	$(VENV)/bin/pip install --quiet -c requirements.lock -e '.[dev]'
	touch $@

venv: $(VENV)/.installed ## Create .venv with the pinned Python dependencies

build: ## Build the pinned Kubernetes, etcd, kwok, CoreDNS and kind binaries (cached)
	@hack/build.sh

cluster: prereqs build ## Start the local cluster; prints its kubeconfig path
	@hack/cluster-up.sh

cluster-down: ## Stop everything the local cluster started
	@hack/cluster-down.sh

cluster-restart: ## Restart one component by its pid file: C=kube-apiserver [DOWN=20] [KILL=1]
	@hack/cluster-restart.sh $(C) --down $(or $(DOWN),0) $(if $(KILL),--kill)

run: venv ## Run the operator locally against $KUBECONFIG
	PJ_LEADER_ELECT=$${PJ_LEADER_ELECT:-false} $(VENV)/bin/paralleljob-operator

# mypy's cache is kept with the builds': it is keyed by module and content, so a fresh
# clone reuses it (3 s instead of 40 on 2 cores).
lint: prereqs venv ## ruff, mypy and shellcheck
	$(VENV)/bin/ruff check operator tests hack bench hack/kind/runc-wrapper
	$(VENV)/bin/ruff format --check operator tests hack bench hack/kind/runc-wrapper
	$(VENV)/bin/mypy --cache-dir $(CACHE_DIR)/mypy
	$(VENV)/bin/mypy --cache-dir $(CACHE_DIR)/mypy hack/kind/runc-wrapper
	shellcheck -S warning hack/*.sh hack/kind/ctr-shim

unit: venv ## Unit tests only (no cluster)
	$(VENV)/bin/pytest tests/unit

.PHONY: layers
layers: venv ## The architecture in figures: modules per layer, cross-layer imports, a pod event's path
	$(PYTHON) hack/layers.py
	$(PYTHON) hack/layers.py --trace

# First the tests that keep to their own namespace and operator, TEST_WORKERS at a time
# (pytest-xdist); then, one at a time, those marked exclusive (tests/conftest.py): they
# deploy an operator for every namespace, restart components or stop the cluster; beside
# them the kind pass on a real kind cluster of its own (hack/test-last.sh): the tests
# marked kind (tests/conftest.py KIND_PASS: tests/deploy but its tests of make
# deploy-local, the seed workloads, the work-queue tests) run there, not locally.
TEST_WORKERS ?= 4
test: prereqs build venv lint ## Everything: lint, unit, cluster smoke, integration and e2e tests, then the exclusive ones beside the kind path (TEST_WORKERS=4)
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist worksteal -m 'not exclusive and not kind' tests
	@hack/test-last.sh

.PHONY: test-kind
test-kind: prereqs build venv ## The tests marked kind (tests/deploy, the upgrade test, the seed workloads, the work-queue tests) on a real kind cluster (node image built here; deleted afterwards)
	@hack/kind-test.sh

# tests/fuzz is part of `make test` too (40 examples); here alone, as long as asked.
.PHONY: fuzz test-keda test-schedule
fuzz: prereqs build venv ## Fuzz tests only (tests/fuzz); FUZZ_EXAMPLES=N examples, FUZZ_SEED=S
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_SEED=$(FUZZ_SEED) $(VENV)/bin/pytest tests/fuzz

test-keda: prereqs build venv ## The KEDA autoscaling e2e test at full size (300 items; make test runs 150)
	KEDA_ITEMS=300 $(VENV)/bin/pytest -s tests/e2e/test_keda.py

test-schedule: prereqs build venv ## The ParallelCronJob e2e tests: catch-up across a 5-minute outage (OUTAGE_MINUTES; make test: 2), healthy schedules for 10 minutes (QUIET_MINUTES; make test: 2)
	PJ_SCHEDULE_OUTAGE_MINUTES=$(or $(OUTAGE_MINUTES),5) PJ_SCHEDULE_QUIET_MINUTES=$(or $(QUIET_MINUTES),10) $(VENV)/bin/pytest -n 3 tests/e2e/test_parallel_cron_job.py tests/e2e/test_parallelcronjob_workqueue.py

chaos: prereqs build venv ## The chaos suite alone, full size: components killed and restarted mid-run, kube-apiserver down 20 s, 10 leader pauses, 10 slow links (make test: 1)
	CHAOS_PODS=$(or $(CHAOS_PODS),1000) CHAOS_PAUSE_ROUNDS=$(or $(CHAOS_PAUSE_ROUNDS),10) CHAOS_OUTAGE_SECONDS=$(or $(CHAOS_OUTAGE_SECONDS),20) SLOW_LINK_ROUNDS=$(or $(SLOW_LINK_ROUNDS),10) $(VENV)/bin/pytest -m chaos tests/chaos tests/deploy/test_slow_link.py

# --- Image, in-cluster deploy, demo (Dockerfile, manifests/, hack/{image,deploy,undeploy,demo}.sh)
# kind and the local cluster never share a kubeconfig: an explicit KUBECONFIG
# from the user is passed on; the Makefile's default (the local cluster's) is not.
PJ_USER_KUBECONFIG := $(if $(filter environment command line,$(origin KUBECONFIG)),$(KUBECONFIG))
export PJ_USER_KUBECONFIG

.PHONY: image image-local deploy deploy-local undeploy demo keda keda-down kueue kueue-down docker-down release test-upgrade

test-upgrade: prereqs build venv ## Upgrade the previous release (hack/previous-release.env, built from history) to this tree and back, jobs of every kind in flight, on the local cluster (make test: the upgrade alone, fewer jobs, on kind)
	PJ_UPGRADE_FULL=1 $(VENV)/bin/pytest -s -p no:randomly tests/release

release: prereqs build ## dist/ for VERSION: one install manifest (kubectl apply --server-side -f dist/paralleljob-operator-VERSION.yaml installs and upgrades) and the image as an archive
	@hack/release.sh

image: prereqs ## Build the operator image (also paralleljob-worker's) with docker (FROM python:3.11-slim)
	@hack/image.sh

image-local: prereqs ## Build the same image on a Debian-assembled base, no registry needed
	@hack/image.sh --local

deploy: prereqs build ## kind: create the cluster if missing, build, kind load, apply manifests/, wait
	@hack/deploy.sh kind

deploy-local: prereqs build ## Local cluster: build on Debian's dockerd, import into the node, apply, wait
	@hack/deploy.sh local

undeploy: prereqs build ## Remove the ParallelJobs, operator, RBAC, namespace and CRD (local, else kind)
	@hack/undeploy.sh

demo: prereqs build ## The four seed workloads, operator in-cluster, work queues on Redis, one relaunched by a CronJob (DEMO_CLUSTER=kind for kind)
	@hack/demo.sh

keda: prereqs build ## KEDA v2.21.0 for autoscaling: manifests from its Go module; images built here (local) or pulled (kind)
	@hack/keda.sh up

keda-down: prereqs build ## Remove KEDA (local, else kind)
	@hack/keda.sh down

kueue: prereqs build ## Kueue (the version make test-kueue pins) installed and left running: its e2e config, the image built here (local, else kind)
	@hack/kueue.sh up

kueue-down: prereqs build ## Remove Kueue: its webhooks first, its CRDs while its manager runs (local, else kind)
	@hack/kueue.sh down

docker-down: prereqs ## Stop the docker engine hack/dockerd.sh started (by its PID file)
	@hack/dockerd.sh stop

# --- kind without a registry (hack/kind.sh, hack/kind/): the node image built here,
# on kind's own dockerd ($(CACHE_DIR)/dockerd-kind/docker.sock).
.PHONY: kind-image kind-up kind-smoke kind-down kind-off

kind-image: prereqs ## Build kind's node image here (cached): kubeadm, images and base from Go modules and Debian
	@hack/kind.sh image

kind-up: prereqs ## Create the kind cluster from that image (KIND_CLUSTER_NAME, default paralleljob); prints its kubeconfig
	@hack/kind.sh up

kind-smoke: prereqs ## A busybox pod on that cluster must resolve and reach the kubernetes Service
	@hack/kind.sh smoke

kind-down: prereqs ## Delete that kind cluster
	@hack/kind.sh down

kind-off: prereqs ## Delete that kind cluster and stop kind's docker engine (by its PID file)
	@hack/kind.sh off

# --- Benchmark (bench/, docs/benchmark.md): the local cluster only (audit log, /proc),
# started first if it does not answer, as make demo does.
.PHONY: bench bench-quick
LOCAL_CLUSTER_UP = kubectl --kubeconfig .cluster/kubeconfig version >/dev/null 2>&1 || $(MAKE) --no-print-directory cluster

bench: prereqs build venv ## Benchmark against the built-in Job controller (hours; BENCH_QUICK=1: minutes)
	@$(LOCAL_CLUSTER_UP)
	$(PYTHON) -m bench

bench-quick: prereqs build venv ## The benchmark scaled down: every scenario once, the API budget in scenario 1 only (a smoke test, ~2 minutes)
	@$(LOCAL_CLUSTER_UP)
	$(PYTHON) -m bench --quick

# The scale harness (bench/scale/): no cluster, the operator against a stub API on
# loopback, niced (the machine is shared). LABEL names the results, to compare runs.
.PHONY: bench-scale
bench-scale: venv ## The operator against a stub API at 600/6,000/60,000 objects, no cluster (BENCH_QUICK=1: 600, < 2 min; LABEL=name)
	BENCH_QUICK=$(BENCH_QUICK) nice -n 10 $(PYTHON) -m bench.scale --label $(or $(LABEL),run)

# --- Kubernetes' own e2e suite (hack/test-upstream.sh, docs/upstream-e2e.md): its Job and
# CronJob specs, unmodified, on the local cluster (started first if it does not answer).
.PHONY: test-upstream
test-upstream: prereqs build venv ## Kubernetes' e2e Job specs on the local cluster: UPSTREAM_SUITE=job|conformance|quick|cronjob|all, UPSTREAM_CONTROLLER=builtin|operator
	@$(LOCAL_CLUSTER_UP)
	@hack/test-upstream.sh

# --- Kueue's own e2e suite (hack/test-kueue.sh, docs/kueue.md): its Job specs, unmodified,
# against both Job controllers, Kueue installed for the run and removed after it.
.PHONY: test-kueue
test-kueue: prereqs build venv ## Kueue's e2e Job specs on the local cluster, built-in then operator: KUEUE_SUITE=job|all, KUEUE_CONTROLLER=both|builtin|operator
	@$(LOCAL_CLUSTER_UP)
	@hack/test-kueue.sh
