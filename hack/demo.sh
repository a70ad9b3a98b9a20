#!/usr/bin/env bash
# make demo: the seed's four workloads as ParallelJobs, driven by the operator
# running in-cluster from its image, shown the way the seed shows
# `kubectl get jobs`, with the seed's COMPLETIONS strings checked at the end.
#
#   DEMO_CLUSTER=local (default)  starts the local cluster if it is not up
#                                 (make cluster), then hack/deploy.sh local
#   DEMO_CLUSTER=kind             hack/deploy.sh kind: the kind cluster
#                                 $KIND_CLUSTER_NAME, created if missing
#
# Leaves the cluster, the operator and the demo's ParallelJobs running.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_DIR/kube-target.sh"

CLUSTER=${DEMO_CLUSTER:-local}
NS=${DEMO_NAMESPACE:-paralleljob-demo}
EXAMPLES=manifests/examples
cd "$REPO_ROOT" || exit 1
STEP_TIMEOUT=${DEMO_STEP_TIMEOUT:-180}
start=$SECONDS

if [ -t 1 ]; then B=$'\e[1m' G=$'\e[32m' R=$'\e[31m' D=$'\e[2m' N=$'\e[0m'; else B='' G='' R='' D='' N=''; fi
say() { printf '\n%s== %s%s\n' "$B" "$*" "$N"; }
# Prints a command the way the seed does, then runs it; `kubectl` here means
# the demo's cluster and, unless told otherwise, the demo namespace.
show() {
  local shown=() a
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then shown+=("$a"); else shown+=("'$a'"); fi
  done
  printf '%s$ %s%s\n' "$D" "${shown[*]}" "$N"
  if [ "$1" = kubectl ]; then shift; command kubectl ${KUBE_CONTEXT:+--context "$KUBE_CONTEXT"} -n "$NS" "$@"; else "$@"; fi
}

# --- 1. a cluster and the operator in it -------------------------------------
case $CLUSTER in
  local)
    if ! { [ -s "$LOCAL_KUBECONFIG" ] && KUBECONFIG=$LOCAL_KUBECONFIG command kubectl version >/dev/null 2>&1; }; then
      say "Starting the local cluster (make cluster; the first run builds Kubernetes from source)"
      make -C "$REPO_ROOT" --no-print-directory cluster
    fi ;;
  kind) ;;
  *) die "DEMO_CLUSTER must be local or kind, not '$CLUSTER'" ;;
esac
say "Deploying the operator in-cluster from its image (hack/deploy.sh $CLUSTER)"
"$HACK_DIR/deploy.sh" "$CLUSTER"
use_cluster "$CLUSTER"
show kubectl -n "$PJ_SYSTEM_NAMESPACE" get deployment,pods -o wide
operator_image=$(kubectl -n "$PJ_SYSTEM_NAMESPACE" get deployment paralleljob-operator -o jsonpath='{.spec.template.spec.containers[0].image}')

# --- helpers -------------------------------------------------------------------
# A column of a `kubectl get pj NAME` table, cut at the header's positions
# (COMPLETIONS such as "3/1 of 3" holds spaces).
pj_column_of() {
  awk -v col="$2" '
    NR == 1 { s = index($0, col); rest = substr($0, s + length(col)); match(rest, /[^ ]/);
              nxt = (RSTART ? s + length(col) + RSTART - 1 : 0); next }
    NR == 2 && s { v = nxt ? substr($0, s, nxt - s) : substr($0, s); sub(/ +$/, "", v); print v }' <<<"$1"
}
pj_column() { pj_column_of "$(kubectl -n "$NS" get pj "$1" 2>/dev/null)" "$2"; }

# Prints `kubectl get pj NAME` and its pods whenever their state changes (not
# merely their age), until STATUS is Complete or Failed. What is printed is
# exactly what the change was detected on.
watch_pj() {
  local name=$1 last='' now pj pods status deadline=$((SECONDS + STEP_TIMEOUT))
  while :; do
    pj=$(kubectl -n "$NS" get pj "$name" 2>&1)
    pods=$(kubectl -n "$NS" get pods -l "app.kubernetes.io/name=$name" 2>&1)
    status=$(pj_column_of "$pj" STATUS)
    now="$status|$(pj_column_of "$pj" COMPLETIONS)|$(awk 'NR > 1 {print $1, $2, $3}' <<<"$pods")"
    if [ "$now" != "$last" ]; then
      printf '\n%s$ kubectl get pj %s%s\n%s\n' "$D" "$name" "$N" "$pj"
      printf '%s$ kubectl get pods -l app.kubernetes.io/name=%s%s\n%s\n' "$D" "$name" "$N" "$pods"
      last=$now
    fi
    case $status in Complete | Failed) return 0 ;; esac
    if [ $SECONDS -ge $deadline ]; then
      printf '%stimed out after %ss waiting for %s to finish%s\n' "$R" "$STEP_TIMEOUT" "$name" "$N"
      return 1
    fi
    sleep 1
  done
}

results=()
check() { # name, expected completions, [expected status]
  local got status
  got=$(pj_column "$1" COMPLETIONS)
  status=$(pj_column "$1" STATUS)
  if [ "$got" = "$2" ] && [ "$status" = "${3:-Complete}" ]; then
    results+=("${G}ok${N}   $(printf '%-22s %-10s %-10s (seed: %s)' "$1" "$status" "$got" "$2")")
  else
    results+=("${R}FAIL${N} $(printf '%-22s %-10s %-10s (seed: %s %s)' "$1" "$status" "$got" "${3:-Complete}" "$2")")
  fi
}

# --- 2. the four workloads ------------------------------------------------------
say "A fresh namespace for the demo: $NS"
kubectl delete namespace "$NS" --ignore-not-found --wait --timeout=120s >/dev/null
kubectl create namespace "$NS" >/dev/null
echo "namespace/$NS created"

say "1. A task run exactly once: completions 1, parallelism 1, backoffLimit 0"
show kubectl apply -f "$EXAMPLES/single-job.yaml"
watch_pj single-job || true
check single-job "1/1"

say "2. Three at a time until five successes: completions 5, parallelism 3"
show kubectl apply -f "$EXAMPLES/multi-task-job.yaml"
watch_pj multi-task-job || true
check multi-task-job "5/5"

say "3. A parallel work queue: completions unset, parallelism 3"
show kubectl apply -f "$EXAMPLES/multi-workqueue-job.yaml"
watch_pj multi-workqueue-job || true
check multi-workqueue-job "3/1 of 3"

say "   parallelism can change at run time; on a finished work queue only the display follows"
show kubectl patch pj multi-workqueue-job --type=merge -p '{"spec": {"parallelism": 1}}'
sleep 2
show kubectl get pj
check multi-workqueue-job "3/1"
show kubectl patch pj multi-workqueue-job --type=merge -p '{"spec": {"parallelism": 2}}'
sleep 2
show kubectl get pj
check multi-workqueue-job "3/1 of 2"

say "4. A one-at-a-time work queue: completions unset, parallelism 1"
show kubectl apply -f "$EXAMPLES/single-workqueue-job.yaml"
watch_pj single-workqueue-job || true
check single-workqueue-job "1/1"

# --- 3. summary -----------------------------------------------------------------
say "All four, as kubectl prints them"
show kubectl get pj
show kubectl get pods

say "Summary ($((SECONDS - start))s)"
echo "operator: deployment/paralleljob-operator in $PJ_SYSTEM_NAMESPACE, image $operator_image ($CLUSTER cluster)"
failed=0
for r in "${results[@]}"; do
  echo "  $r"
  [[ $r == *FAIL* ]] && failed=1
done
echo
echo "The cluster is still running. Explore it:"
if [ "$CLUSTER" = local ]; then
  echo "  export KUBECONFIG=$LOCAL_KUBECONFIG PATH=$CACHE_DIR/kubernetes-$KUBERNETES_VERSION/bin:\$PATH"
  echo "  kubectl -n $NS get pj,pods;  kubectl -n $PJ_SYSTEM_NAMESPACE logs deploy/paralleljob-operator"
  echo "Stop it:  make cluster-down   (and the docker engine that built the image: make docker-down)"
else
  echo "  kubectl --context $KUBE_CONTEXT -n $NS get pj,pods"
  echo "Stop it:  make undeploy   (the whole kind cluster: kind delete cluster --name $KIND_CLUSTER_NAME)"
fi
exit $failed
