#!/usr/bin/env bash
# Runs Kueue's own e2e suite (test/e2e/singlecluster of sigs.k8s.io/kueue at
# KUEUE_VERSION, unmodified) on the local cluster, against the built-in Job
# controller and against the operator as the cluster's Job controller, and
# prints one row per spec with both arms side by side (docs/kueue.md).
# Usage: hack/test-kueue.sh          (make test-kueue starts the cluster first)
#   KUEUE_SUITE       job (default): the feature:job and feature:e2e_v1beta1 specs;
#                     all: and feature:visibility, feature:fairsharing, feature:metrics
#   KUEUE_CONTROLLER  both (default), builtin or operator: the arms to run, in that
#                     order; operator: kube-controller-manager without its Job
#                     controller (PJ_BUILTIN_JOB_CONTROLLER=off) and .venv's
#                     paralleljob-operator on the host with PJ_MANAGE_JOBS=all
#   KUEUE_REPORT_DIR  where each arm's JUnit report and log,
#                     the operator's log and specs.md go (default .kueue-e2e/SUITE, emptied)
#   KUEUE_ARGS        more flags for the suite's binary, split on spaces
#                     (-ginkgo.fail-fast, -ginkgo.focus=...)
# Kueue is installed once for both arms by hack/kueue.sh (make kueue: its e2e config,
# fitted to one node by hack/kueue/), and uninstalled at the end in an order that never
# leaves its webhooks behind, whatever failed; kube-controller-manager is restarted as it was, and the node's
# instance-type label removed. Exits non-zero when a selected spec failed in an arm.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_DIR/cluster-env.sh"
source "$HACK_DIR/job-controller.sh"

KUEUE_DIR=$CACHE_DIR/kueue-$KUEUE_VERSION
SUITE_BIN=$KUEUE_DIR/bin/singlecluster.test
# The specs of batch/v1 Jobs; the suite's other labels need other operators
# (JobSet, LWS, Kubeflow, KubeRay, AppWrapper, Prometheus) or are not Jobs.
JOB_LABELS='feature:job || feature:e2e_v1beta1'
ALL_LABELS="$JOB_LABELS || feature:visibility || feature:fairsharing || feature:metrics"
# The ResourceFlavor the specs admit to first; pods of its second (spot) may stay
# Pending: the specs check only the Job's suspend and nodeSelector there.
NODE_LABEL=instance-type
NODE_LABEL_VALUE=on-demand

suite=${KUEUE_SUITE:-job}
case $suite in
  job) labels=$JOB_LABELS ;;
  all) labels=$ALL_LABELS ;;
  *) die "KUEUE_SUITE must be job or all, got '$suite'" ;;
esac
case ${KUEUE_CONTROLLER:-both} in
  both) arms=(builtin operator) ;;
  builtin | operator) arms=("$KUEUE_CONTROLLER") ;;
  *) die "KUEUE_CONTROLLER must be both, builtin or operator, got '$KUEUE_CONTROLLER'" ;;
esac
report_dir=${KUEUE_REPORT_DIR:-$REPO_ROOT/.kueue-e2e/$suite}
read -r -a extra_args <<<"${KUEUE_ARGS:-}"

kubectl get --raw /readyz >/dev/null 2>&1 || die "the local cluster does not answer: start it with 'make cluster'"
pid_alive kube-controller-manager || die "kube-controller-manager is not running (make cluster)"
"$HACK_DIR/build.sh" kueue

# load_images: agnhost, built here, into the node's containerd (hack/kueue.sh loads
# Kueue's manager); sets agnhost_image to the reference the specs are told to run.
load_images() {
  local ref tarball
  while read -r ref tarball; do
    "$HACK_DIR/load-image.sh" "$tarball"
    [[ $ref == */agnhost:* ]] && agnhost_image=$ref
  done < <(python3 "$HACK_DIR/images/build_image.py" --cache-dir "$CACHE_DIR" agnhost)
}

install_kueue() {
  kubectl label node "$REAL_NODE" "$NODE_LABEL=$NODE_LABEL_VALUE" --overwrite >/dev/null
  "$HACK_DIR/kueue.sh" up local
}

uninstall_kueue() {
  "$HACK_DIR/kueue.sh" down local
  kubectl label node "$REAL_NODE" "$NODE_LABEL-" >/dev/null 2>&1 || true
}

# check_clean: nothing of Kueue's is left to admit, reject or serve anything, and a
# plain Job still runs to Complete with the Job controller restored.
check_clean() {
  local left ns=kueue-e2e-after-$$
  left=$(kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations,apiservices,crds -o name |
    grep -E 'kueue' || true)
  [ -z "$left" ] || { log "kueue: left behind: $left"; return 1; }
  kubectl create namespace "$ns" >/dev/null
  kubectl -n "$ns" create job plain --image="$BUSYBOX_IMAGE" -- true >/dev/null
  if [ "$initial_job_controller" = off ]; then
    log "kueue: the cluster ran without its Job controller before: no plain Job checked"
  elif ! kubectl -n "$ns" wait job/plain --for=condition=Complete --timeout=120s >/dev/null; then
    log "kueue: a plain Job did not complete after the uninstall"
    kubectl delete namespace "$ns" --wait=false >/dev/null
    return 1
  else
    log "kueue: nothing of Kueue's left; a plain Job ran to Complete"
  fi
  kubectl delete namespace "$ns" --wait=false >/dev/null
}

# run_arm ARM: the suite against one Job controller; its JUnit report and log in
# $report_dir/ARM. Returns the suite's exit status.
run_arm() {
  local arm=$1 dir=$report_dir/$1 status=0 start=$SECONDS
  mkdir -p "$dir"
  if [ "$arm" = builtin ]; then set_job_controller on; else set_job_controller off; fi
  [ "$arm" = builtin ] || start_operator "$dir"
  log "kueue e2e: $suite specs ($labels), $arm Job controller"
  # The suite finds its manifests and test configs from PROJECT_DIR, and writes its
  # JUnit report into ARTIFACTS.
  (
    cd "$KUEUE_DIR/src" &&
      KUBECONFIG=$KUBECONFIG_ADMIN PROJECT_DIR=$KUEUE_DIR/src/ ARTIFACTS=$dir TEST_LOG_LEVEL=-3 \
        E2E_TEST_AGNHOST_IMAGE=$agnhost_image \
        "$SUITE_BIN" -ginkgo.label-filter="$labels" -ginkgo.v -ginkgo.no-color \
        -ginkgo.timeout=90m "${extra_args[@]}"
  ) >"$dir/e2e.log" 2>&1 || status=$?
  [ "$arm" = builtin ] || stop_operator "$dir"
  log "kueue e2e: $arm arm exited $status after $((SECONDS - start))s (log $dir/e2e.log)"
  return "$status"
}

initial_job_controller=
cleanup() {
  local status=$?
  set +e
  for arm in "${arms[@]}"; do stop_operator "$report_dir/$arm"; done
  uninstall_kueue
  if [ -n "$initial_job_controller" ] && pid_alive kube-controller-manager; then
    set_job_controller "$initial_job_controller"
    check_clean || status=1
  fi
  exit "$status"
}

rm -rf "$report_dir" && mkdir -p "$report_dir"
agnhost_image=
load_images
# The project's busybox, preloaded by cluster-up, for check_clean's plain Job.
BUSYBOX_IMAGE=$(python3 "$HACK_DIR/images/build_image.py" --cache-dir "$CACHE_DIR" busybox | cut -d' ' -f1)
[ -n "$agnhost_image" ] || die "build_image.py built no agnhost image"
initial_job_controller=$(job_controller)
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
install_kueue

failed=0
columns=()
for arm in "${arms[@]}"; do
  run_arm "$arm" || failed=1
  columns+=("$arm=$report_dir/$arm")
done
# A ParallelJob queued by Kueue while it is here: pod by pod (plain-pod integration), and
# as one Workload beside a Job (the operator's Workload controller, Kueue's Job integration),
# whose Jobs the built-in controller runs as the cluster had it.
set_job_controller "$initial_job_controller"
log "kueue: ParallelJobs queued by Kueue (tests/e2e/test_kueue.py, test_kueue_workload.py)"
"$REPO_ROOT/.venv/bin/pytest" -p no:cacheprovider -q "$REPO_ROOT/tests/e2e/test_kueue.py" \
  "$REPO_ROOT/tests/e2e/test_kueue_workload.py" >"$report_dir/paralleljob.log" 2>&1 || failed=1
tail -n 1 "$report_dir/paralleljob.log"
# Skipped would mean it never saw Kueue: a failure here.
! tail -n 1 "$report_dir/paralleljob.log" | grep -q skipped || failed=1

report_status=0
python3 "$HACK_DIR/upstream_report.py" --markdown "$report_dir/specs.md" "${columns[@]}" \
  >"$report_dir/specs.txt" || report_status=$?
cat "$report_dir/specs.txt"
log "kueue e2e ($suite): report in $report_dir"
[ "$failed" -eq 0 ] && [ "$report_status" -eq 0 ]
