#!/usr/bin/env bash
# The kind path tested for real (make test-kind; the last pass of make test):
# hack/kind.sh's cluster (its node image built here, cached), a busybox pod
# through its network (hack/kind.sh smoke), then the tests marked kind (tests/conftest.py
# KIND_PASS): tests/deploy (make deploy's path: image built and kind-loaded, manifests
# applied, the operator in-cluster), the seed's four workloads and the work-queue tests
# on real pods, against it, through PJ_TEST_KUBECONFIG. Afterwards the cluster is deleted, and
# kind's docker engine stopped when this script started it (its data root, the
# node image with it, stays cached).
#
#   hack/kind-test.sh [PYTEST ARGS...]   default: -m kind tests
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KIND=$HACK_DIR/kind.sh
PYTEST=${PYTEST:-$REPO_ROOT/.venv/bin/pytest}
[ $# -gt 0 ] || set -- -m kind tests
start=$SECONDS

engine_was_running=0
"$KIND" running >/dev/null 2>&1 && engine_was_running=1
finish() {
  local status=$?
  if [ $engine_was_running = 1 ]; then "$KIND" down; else "$KIND" off; fi
  log "kind tests: done in $((SECONDS - start))s"
  exit $status
}
trap finish EXIT

kubeconfig=$("$KIND" up)
log "kind tests: cluster up after $((SECONDS - start))s"
"$KIND" smoke
cd "$REPO_ROOT" || exit 1
eval "$("$KIND" env)"
# The cluster is deleted afterwards: a test's teardown need not undo what it installed.
PJ_TEST_CLUSTER_DISPOSABLE=1 PJ_TEST_KUBECONFIG=$kubeconfig "$PYTEST" "$@"
