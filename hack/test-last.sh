#!/usr/bin/env bash
# make test's last two passes at once: the exclusive tests on the local cluster
# (pytest -m exclusive tests, one at a time; of tests/deploy only those marked
# localcluster, make deploy-local's own: the rest run on kind) and the kind pass
# (hack/kind-test.sh -m kind: the tests marked kind, tests/deploy, the seed workloads and
# the work-queue tests, on a kind cluster of its own, on its own docker engine). They
# share no cluster, and neither waits for the other: the
# exclusive tests mostly wait on the cluster (a third of 2 cores busy, measured),
# kind's cluster start and image build are what needs the cores.
#
#   hack/test-last.sh     the kind pass's output goes to PJ_KIND_TEST_LOG (default
#                         .kind-test.log) and is printed once both are done
#
# Exits non-zero when either failed. Ctrl-C or SIGTERM reaches both, so kind-test.sh
# still deletes its cluster.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PYTEST=${PYTEST:-$REPO_ROOT/.venv/bin/pytest}
kind_log=${PJ_KIND_TEST_LOG:-$REPO_ROOT/.kind-test.log}
cd "$REPO_ROOT" || exit 1
start=$SECONDS

log "make test: the kind pass beside the exclusive tests (its log: $kind_log)"
"$HACK_DIR/kind-test.sh" -m kind tests >"$kind_log" 2>&1 &
kind_pid=$!
# A background job of a script ignores SIGINT: Ctrl-C is passed on as SIGTERM, on which
# kind-test.sh's EXIT trap still deletes its cluster.
stop_kind() { kill -TERM "$kind_pid" 2>/dev/null || true; wait "$kind_pid" 2>/dev/null || true; }
trap 'stop_kind; exit 130' INT
trap 'stop_kind; exit 143' TERM

exclusive=0
"$PYTEST" -m 'exclusive and not (kind and not localcluster)' tests || exclusive=$?
log "make test: exclusive tests done ($exclusive) after $((SECONDS - start))s"
kind=0
wait "$kind_pid" || kind=$?
echo "--- the kind pass (make test-kind), run beside the exclusive tests:"
cat "$kind_log"
log "make test: exclusive tests exited $exclusive, the kind pass $kind; both done after $((SECONDS - start))s"
[ "$exclusive" -eq 0 ] && [ "$kind" -eq 0 ]
