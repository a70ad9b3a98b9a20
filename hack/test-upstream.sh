#!/usr/bin/env bash
# Runs Kubernetes' own e2e specs of Jobs (and of CronJobs, which need a Job
# controller to finish their Jobs) unmodified against the running local
# cluster, with the built-in Job controller or with the operator reconciling
# every batch/v1 Job, and prints one row per spec (docs/upstream-e2e.md).
# Usage: hack/test-upstream.sh        (make test-upstream starts the cluster first)
#   UPSTREAM_SUITE       job (default): [sig-apps] Job, the specs of apps/job.go;
#                        conformance: only their [Conformance] ones (quick);
#                        cronjob: [sig-apps] CronJob and TTLAfterFinished; all: job + cronjob
#   UPSTREAM_CONTROLLER  builtin (default): kube-controller-manager's Job controller;
#                        operator: kube-controller-manager without it
#                        (PJ_BUILTIN_JOB_CONTROLLER=off) and .venv's paralleljob-operator
#                        on the host with PJ_MANAGE_JOBS=all, all namespaces
#   UPSTREAM_REPORT_DIR  where the JUnit report, e2e.log, specs.txt, specs.md and the
#                        operator's log go (default .upstream-e2e/SUITE-CONTROLLER, emptied)
#   UPSTREAM_ARGS        more e2e.test flags, split on spaces (--ginkgo.fail-fast,
#                        --ginkgo.timeout=3h: ginkgo's default for the whole run is 1h)
#   UPSTREAM_PROCS       1 (default): one e2e.test process, the specs one at a time;
#                        N > 1: the ginkgo CLI (hack/build.sh e2e) runs them in N
#                        e2e.test processes at once, as upstream's parallel
#                        presubmits do (hack/ginkgo-e2e.sh), which is why the skip
#                        pattern leaves out [Serial]
# kube-controller-manager is restarted only when the Job controller it runs is not
# the one asked for, and then restarted as it was at the end (trap), as is the
# operator stopped by its PID file. Exits non-zero when a selected spec failed.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_DIR/cluster-env.sh"

E2E_BIN=$CACHE_DIR/e2e-$KUBERNETES_VERSION/bin/e2e.test
GINKGO_BIN=$CACHE_DIR/e2e-$KUBERNETES_VERSION/bin/ginkgo
OPERATOR_BIN=$REPO_ROOT/.venv/bin/paralleljob-operator
JOB_SPECS='\[sig-apps\] Job '
CRONJOB_SPECS='\[sig-apps\] CronJob|\[sig-apps\] TTLAfterFinished'
# As upstream's parallel presubmit runs (less [Disruptive] and [Flaky], which no
# Job spec has): no spec that needs the whole cluster, a feature gate that is off
# (an [Alpha] one, or a [Feature:] the cluster lacks),
# or many minutes.
SKIP='\[Serial\]|\[Feature:|\[Slow\]|\[Alpha\]'

suite=${UPSTREAM_SUITE:-job}
controller=${UPSTREAM_CONTROLLER:-builtin}
case $suite in
  job) focus=$JOB_SPECS ;;
  conformance) focus="$JOB_SPECS.*\\[Conformance\\]" ;;
  cronjob) focus=$CRONJOB_SPECS ;;
  all) focus="$JOB_SPECS|$CRONJOB_SPECS" ;;
  *) die "UPSTREAM_SUITE must be job, conformance, cronjob or all, got '$suite'" ;;
esac
case $controller in
  builtin) want_job_controller=on ;;
  operator) want_job_controller=off ;;
  *) die "UPSTREAM_CONTROLLER must be builtin or operator, got '$controller'" ;;
esac
report_dir=${UPSTREAM_REPORT_DIR:-$REPO_ROOT/.upstream-e2e/$suite-$controller}
read -r -a extra_args <<<"${UPSTREAM_ARGS:-}"
procs=${UPSTREAM_PROCS:-1}
[[ $procs =~ ^[1-9][0-9]*$ ]] || die "UPSTREAM_PROCS must be a number of processes (1 or more), got '$procs'"

kubectl get --raw /readyz >/dev/null 2>&1 || die "the local cluster does not answer: start it with 'make cluster'"
pid_alive kube-controller-manager || die "kube-controller-manager is not running (make cluster)"
[ "$controller" = builtin ] || [ -x "$OPERATOR_BIN" ] || die "$OPERATOR_BIN is missing: run 'make venv'"
[ -x "$E2E_BIN" ] && [ -x "$GINKGO_BIN" ] || "$HACK_DIR/build.sh" e2e

# job_controller: on or off, as the running kube-controller-manager was started.
job_controller() {
  if tr '\0' '\n' <"/proc/$(pid_of kube-controller-manager)/cmdline" | grep -q -- '^--controllers=.*-job-controller'; then
    echo off
  else
    echo on
  fi
}

# set_job_controller on|off: restarts kube-controller-manager if it runs the other.
set_job_controller() {
  [ "$(job_controller)" = "$1" ] && return
  log "upstream e2e: restarting kube-controller-manager with PJ_BUILTIN_JOB_CONTROLLER=$1"
  PJ_BUILTIN_JOB_CONTROLLER=$1 "$HACK_DIR/cluster-restart.sh" kube-controller-manager
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

OPERATOR_PID_FILE=$report_dir/operator.pid
# The operator on the host as tests/e2e runs it, for every namespace and every
# Job: no leader election, the cluster admin's kubeconfig, its kubeconfig
# certificates' temporary files in the report directory.
start_operator() {
  local port metrics_port deadline
  # Its preflight needs the ParallelJob CRD, Established (polled: a CRD created a moment
  # ago may have no conditions yet, which `kubectl wait` takes for an error).
  kubectl apply --server-side --force-conflicts -k "$REPO_ROOT/crds" >/dev/null
  deadline=$((SECONDS + 60))
  until [ "$(kubectl get crd/paralleljobs.paralleljob.dev \
    -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')" = True ]; do
    [ "$SECONDS" -lt "$deadline" ] || die "the ParallelJob CRD is not Established after 60s"
    sleep 0.5
  done
  port=$(free_port)
  metrics_port=$(free_port)
  mkdir -p "$report_dir/operator-tmp"
  PJ_MANAGE_JOBS=all PJ_LEADER_ELECT=false KUBECONFIG=$KUBECONFIG_ADMIN PYTHONUNBUFFERED=1 \
    TMPDIR=$report_dir/operator-tmp setsid "$OPERATOR_BIN" --bind-address 127.0.0.1 \
    --liveness-port "$port" --metrics-port "$metrics_port" </dev/null >"$report_dir/operator.log" 2>&1 &
  echo "$!" >"$OPERATOR_PID_FILE"
  deadline=$((SECONDS + 60))
  until curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do
    if ! operator_alive; then
      tail -n 25 "$report_dir/operator.log" >&2
      die "the operator exited during startup (log: $report_dir/operator.log)"
    fi
    [ "$SECONDS" -lt "$deadline" ] || die "the operator's /healthz did not answer in 60s (log: $report_dir/operator.log)"
    sleep 0.5
  done
  log "upstream e2e: operator running (pid $(cat "$OPERATOR_PID_FILE"), PJ_MANAGE_JOBS=all," \
    "metrics on 127.0.0.1:$metrics_port, log $report_dir/operator.log)"
}

# operator_alive: the PID file's process is alive and still the operator.
operator_alive() {
  local pid
  [ -f "$OPERATOR_PID_FILE" ] && read -r pid <"$OPERATOR_PID_FILE" && [ -d "/proc/$pid" ] &&
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$OPERATOR_BIN"
}

stop_operator() {
  operator_alive || return 0
  terminate "$(cat "$OPERATOR_PID_FILE")" paralleljob-operator
  rm -f "$OPERATOR_PID_FILE"
}

initial_job_controller=
cleanup() {
  local status=$?
  set +e
  stop_operator
  if [ -n "$initial_job_controller" ] && pid_alive kube-controller-manager; then
    set_job_controller "$initial_job_controller"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

rm -rf "$report_dir" && mkdir -p "$report_dir"
initial_job_controller=$(job_controller)
set_job_controller "$want_job_controller"
[ "$controller" = builtin ] || start_operator

log "upstream e2e: $suite specs, $controller Job controller, $procs process(es); focus '$focus', skip '$SKIP'"
e2e_args=(--kubeconfig="$KUBECONFIG_ADMIN" --provider=skeleton
  "--non-blocking-taints=node-role.kubernetes.io/control-plane,kwok.x-k8s.io/node"
  --minStartupPods=0 --ginkgo.focus="$focus" --ginkgo.skip="$SKIP" --ginkgo.no-color
  --report-dir="$report_dir" "${extra_args[@]}")
# One process runs e2e.test itself; more, the ginkgo CLI runs N of them, handing out
# the specs, with the same flags after its `--` (one JUnit report all the same,
# written by the first process).
runner=("$E2E_BIN")
[ "$procs" -eq 1 ] || runner=("$GINKGO_BIN" --procs="$procs" --no-color "$E2E_BIN" --)
start=$SECONDS
e2e_status=0
"${runner[@]}" "${e2e_args[@]}" 2>&1 | tee "$report_dir/e2e.log" || e2e_status=$?
log "upstream e2e: e2e.test exited $e2e_status after $((SECONDS - start))s"

report_status=0
python3 "$HACK_DIR/upstream_report.py" --focus "$focus" --markdown "$report_dir/specs.md" "$report_dir" \
  >"$report_dir/specs.txt" || report_status=$?
cat "$report_dir/specs.txt"
log "upstream e2e ($suite, $controller): $(tail -n 1 "$report_dir/specs.txt"); report: $report_dir"
[ "$e2e_status" -eq 0 ] && [ "$report_status" -eq 0 ]
