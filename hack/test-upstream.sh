#!/usr/bin/env bash
# Runs Kubernetes' own e2e specs of Jobs (and of CronJobs, which need a Job
# controller to finish their Jobs) unmodified against the running local
# cluster, with the built-in Job controller or with the operator reconciling
# every batch/v1 Job, and prints one row per spec (docs/upstream-e2e.md).
# Usage: hack/test-upstream.sh        (make test-upstream starts the cluster first)
#   UPSTREAM_SUITE       job (default): [sig-apps] Job, the specs of apps/job.go;
#                        conformance: only their [Conformance] ones (14);
#                        quick: QUICK_SPECS, five of those (make test's check);
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
source "$HACK_DIR/job-controller.sh"

E2E_BIN=$CACHE_DIR/e2e-$KUBERNETES_VERSION/bin/e2e.test
GINKGO_BIN=$CACHE_DIR/e2e-$KUBERNETES_VERSION/bin/ginkgo
JOB_SPECS='\[sig-apps\] Job '
CRONJOB_SPECS='\[sig-apps\] CronJob|\[sig-apps\] TTLAfterFinished'
# As upstream's parallel presubmit runs (less [Disruptive] and [Flaky], which no
# Job spec has): no spec that needs the whole cluster, a feature gate that is off
# (an [Alpha] one, or a [Feature:] the cluster lacks),
# or many minutes.
SKIP='\[Serial\]|\[Feature:|\[Slow\]|\[Alpha\]'
# make test's check, a minute: a job run to completion through failures restarted in
# place, an Indexed job's pods, adoption and release, the status subresource, deletion.
QUICK_SPECS='tasks sometimes fail and are locally restarted|specified hostname|adopt matching orphans|apply changes to a job status|should delete a job'

suite=${UPSTREAM_SUITE:-job}
controller=${UPSTREAM_CONTROLLER:-builtin}
case $suite in
  job) focus=$JOB_SPECS ;;
  conformance) focus="$JOB_SPECS.*\\[Conformance\\]" ;;
  quick) focus="$JOB_SPECS.*($QUICK_SPECS).*\\[Conformance\\]" ;;
  cronjob) focus=$CRONJOB_SPECS ;;
  all) focus="$JOB_SPECS|$CRONJOB_SPECS" ;;
  *) die "UPSTREAM_SUITE must be job, conformance, quick, cronjob or all, got '$suite'" ;;
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

initial_job_controller=
cleanup() {
  local status=$?
  set +e
  stop_operator "$report_dir"
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
[ "$controller" = builtin ] || start_operator "$report_dir"

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
