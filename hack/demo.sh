#!/usr/bin/env bash
# make demo: the seed's four workloads as ParallelJobs, driven by the operator
# running in-cluster from its image, shown the way the seed shows
# `kubectl get jobs`, with the seed's COMPLETIONS strings checked at the end.
# The two work queues (3 and 4) drain a real queue: a Redis stream filled by a
# producer Job, drained by paralleljob-worker pods (manifests/examples/workqueue,
# docs/worker.md), shown as it drains and checked item by item at the end.
# Then workload 3 started again by a batch/v1 CronJob every minute, its Jobs
# run by the operator (spec.managedBy; manifests/examples/cronjob-workqueue):
# a batch drained by a scheduled Job, a second batch by the next one. Then what
# a Job cannot do (docs/beyond.md): a pod that never starts failed at its
# deadline, a scale-down that stops idle workers and no busy one, a failed job
# restarted from nothing.
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
WORKQUEUE=$EXAMPLES/workqueue
CRONJOB=$EXAMPLES/cronjob-workqueue
# The CronJob example has Redis and the producer of $WORKQUEUE too: a namespace
# of its own, so that they meet nothing of workloads 3 and 4.
CRON_NS=${DEMO_CRONJOB_NAMESPACE:-$NS-cronjob}
CRON_NAME=cronjob-workqueue
CRON_LABEL=app.kubernetes.io/name=$CRON_NAME
# Graceful scale-down: Redis and three long items in a namespace of its own.
SCALEDOWN=$EXAMPLES/workqueue-scale-down
SCALE_NS=${DEMO_SCALEDOWN_NAMESPACE:-$NS-scale-down}
SCALE_NAME=scale-down-workqueue-job
COST_ANNOTATION=controller.kubernetes.io/pod-deletion-cost
# The operator's image, which has paralleljob-worker: hack/deploy.sh loads it
# into the node under this name too (hack/node-image.sh).
WORKER_IMAGE=${PJ_IMAGE_NAME:-paralleljob-operator}:dev
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
  kind)
    if kind_here_wanted; then
      say "kind from hack/kind.sh (no container registry reachable: its node image is built here)"
      use_kind_here
    fi ;;
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

# Waits until the operator has written the status of job $1's current spec
# (.status.observedGeneration is .metadata.generation): after a patch, what
# `kubectl get pj` prints next is the operator's answer to it.
wait_observed() {
  local generation
  generation=$(kubectl -n "$NS" get pj "$1" -o jsonpath='{.metadata.generation}') || return 1
  show kubectl wait --for=jsonpath='{.status.observedGeneration}'="$generation" "pj/$1" --timeout="${STEP_TIMEOUT}s"
}

# The work queue as Redis sees it (redis-cli in the Redis pod), into Q_ITEMS
# (entries in the stream), Q_LAG (not delivered to the group yet), Q_PENDING
# (delivered, not acked: being worked on), Q_RESULTS (fields of the hash
# "results") and Q_DEAD (dead letters); "-" when Redis does not answer.
queue_read() {
  local out
  # Before any worker created the group, XINFO GROUPS is empty: all undelivered.
  out=$(kubectl -n "$NS" exec deploy/redis -c redis -- sh -c \
    'redis-cli XLEN items; redis-cli HLEN results; redis-cli XLEN items:dead; redis-cli XINFO GROUPS items' 2>/dev/null \
    | awk 'NR == 1 { n = $0 } NR == 2 { done = $0 } NR == 3 { dead = $0 }
           NR > 3 && NF { if (k == "") k = $0; else { v[k] = $0; k = "" } }
           END { print n, ("lag" in v) ? v["lag"] : n, ("pending" in v) ? v["pending"] : 0, done, dead }') || out=''
  [[ $out =~ ^[0-9]+\ [0-9]+\ [0-9]+\ [0-9]+\ [0-9]+$ ]] || out='- - - - -'
  read -r Q_ITEMS Q_LAG Q_PENDING Q_RESULTS Q_DEAD <<<"$out"
}
queue_line() {
  printf 'queue "items": %s entries, %s to deliver (lag), %s in progress (pending); %s results, %s dead letters\n' \
    "$Q_ITEMS" "$Q_LAG" "$Q_PENDING" "$Q_RESULTS" "$Q_DEAD"
}

# Prints `kubectl get pj NAME` and its pods whenever their state changes (not
# merely their age), until STATUS is Complete or Failed. What is printed is
# exactly what the change was detected on. With a second argument, the Redis
# queue's state too (one line each time it changes): the queue draining.
watch_pj() {
  local name=$1 queue=${2:-} last='' now pj pods status lastq='' q deadline=$((SECONDS + STEP_TIMEOUT))
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
    if [ -n "$queue" ]; then
      queue_read
      q=$(queue_line)
      if [ "$q" != "$lastq" ]; then printf '%s\n' "$q"; lastq=$q; fi
    fi
    case $status in Complete | Failed) return 0 ;; esac
    if [ $SECONDS -ge $deadline ]; then
      printf '%stimed out after %ss waiting for %s to finish%s\n' "$R" "$STEP_TIMEOUT" "$name" "$N"
      return 1
    fi
    sleep 1
  done
}

# Waits until the queue has at least $2 results or job $1 has finished,
# printing the queue as it drains.
wait_results() {
  local name=$1 want=$2 q lastq='' deadline=$((SECONDS + STEP_TIMEOUT))
  while :; do
    queue_read
    q=$(queue_line)
    if [ "$q" != "$lastq" ]; then printf '%s\n' "$q"; lastq=$q; fi
    if [[ $Q_RESULTS =~ ^[0-9]+$ ]] && [ "$Q_RESULTS" -ge "$want" ]; then return 0; fi
    case $(pj_column "$name" STATUS) in Complete | Failed) return 0 ;; esac
    if [ $SECONDS -ge $deadline ]; then
      printf '%stimed out after %ss waiting for %s results%s\n' "$R" "$STEP_TIMEOUT" "$want" "$N"
      return 1
    fi
    sleep 1
  done
}

# The CronJob's Jobs (the label of its jobTemplate), oldest first, one a line.
cron_jobs() {
  kubectl -n "$NS" get jobs -l "$CRON_LABEL" --sort-by=.metadata.creationTimestamp \
    -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' 2>/dev/null
}

# How many items the workers of Job $1 did: their logs' "item ... done" lines.
items_done_by() {
  kubectl -n "$NS" logs -l "batch.kubernetes.io/job-name=$1" --tail=-1 2>/dev/null | grep -c ': item .* done in ' || true
}

# Prints `kubectl get cronjob` and its Jobs whenever they change (a run
# scheduled, a Job's pods counted, a Job finished; not merely their ages), and
# the Redis queue each time it changes, until the queue holds $2 results with
# nothing undelivered or pending and every Job of the CronJob has finished.
watch_cron() {
  local name=$1 want=$2 last='' now jobs q lastq='' unfinished deadline=$((SECONDS + STEP_TIMEOUT))
  while :; do
    jobs=$(kubectl -n "$NS" get jobs -l "$CRON_LABEL" -o jsonpath='{range .items[*]}{.metadata.name} {.status.active}/{.status.succeeded} {.status.conditions[?(@.status=="True")].type}{"\n"}{end}' 2>&1)
    now="$(kubectl -n "$NS" get cronjob "$name" -o jsonpath='{.status.lastScheduleTime} {.status.active[*].name}' 2>&1)|$jobs"
    if [ "$now" != "$last" ]; then
      printf '\n%s$ kubectl get cronjob %s%s\n%s\n' "$D" "$name" "$N" "$(kubectl -n "$NS" get cronjob "$name" 2>&1)"
      printf '%s$ kubectl get jobs -l %s%s\n%s\n' "$D" "$CRON_LABEL" "$N" "$(kubectl -n "$NS" get jobs -l "$CRON_LABEL" 2>&1)"
      last=$now
    fi
    queue_read
    q=$(queue_line)
    if [ "$q" != "$lastq" ]; then printf '%s\n' "$q"; lastq=$q; fi
    unfinished=$(grep -Evc ' .*(Complete|Failed)' <<<"$jobs" || true)
    if [ -n "$jobs" ] && [ "$unfinished" = 0 ] && [ "$Q_RESULTS" = "$want" ] && [ "$Q_LAG" = 0 ] && [ "$Q_PENDING" = 0 ]; then
      return 0
    fi
    if [ $SECONDS -ge $deadline ]; then
      printf '%stimed out after %ss waiting for a scheduled Job to drain %s results%s\n' "$R" "$STEP_TIMEOUT" "$want" "$N"
      return 1
    fi
    sleep 1
  done
}

# The pods of job $1 that are not being deleted, each as NAME=COST (its
# pod-deletion-cost annotation), one a line.
pod_costs() {
  kubectl -n "$NS" get pods -l "app.kubernetes.io/name=$1" -o \
    jsonpath='{range .items[*]}{.metadata.name}={.metadata.annotations.controller\.kubernetes\.io/pod-deletion-cost}={.metadata.deletionTimestamp}{"\n"}{end}' 2>/dev/null \
    | awk -F= '$3 == "" {print $1 "=" $2}'
}
# Waits until job $1 has $2 busy (cost 100) and $3 idle (cost -100) workers.
wait_costs() {
  local deadline=$((SECONDS + STEP_TIMEOUT)) costs
  while [ $SECONDS -lt $deadline ]; do
    costs=$(pod_costs "$1")
    if [ "$(grep -c '=100$' <<<"$costs")" = "$2" ] && [ "$(grep -c '=-100$' <<<"$costs")" = "$3" ]; then
      return 0
    fi
    sleep 1
  done
  printf '%stimed out after %ss waiting for %s busy and %s idle workers%s\n' "$R" "$STEP_TIMEOUT" "$2" "$3" "$N"
  return 1
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
# The queue after a work-queue job: every item enqueued so far has its result
# (the hash has one field per item), none is dead-lettered, nothing is left
# undelivered or pending.
check_queue() {
  local label="queue \"items\"" got
  queue_read
  got="$Q_RESULTS/$Q_ITEMS results, $Q_DEAD dead, lag $Q_LAG, pending $Q_PENDING"
  if [[ $Q_ITEMS =~ ^[1-9][0-9]*$ ]] && [ "$Q_RESULTS" = "$Q_ITEMS" ] && [ "$Q_DEAD" = 0 ] && [ "$Q_LAG" = 0 ] && [ "$Q_PENDING" = 0 ]; then
    results+=("${G}ok${N}   $(printf '%-22s %s (after %s)' "$label" "$got" "$1")")
  else
    results+=("${R}FAIL${N} $(printf '%-22s %s (after %s; every item done once)' "$label" "$got" "$1")")
  fi
}
# After a batch of $3 items: which of CronJob $1's Jobs not in $2 (the Jobs
# before the batch, names) did them, from their workers' logs, printed as the
# queue check; each of those must be Complete, `3/1 of 3` as the seed's
# workload 3, scheduled by the CronJob and named for the operator in
# spec.managedBy; together they did the batch.
check_cron_job() {
  local name=$1 before=" ${2//$'\n'/ } " items=$3 job did total=0 table status got by
  for job in $(cron_jobs || true); do
    [[ $before == *" $job "* ]] && continue
    did=$(items_done_by "$job")
    echo "queue check: job/$job: its workers did $did items"
    [ "$did" -gt 0 ] || continue
    total=$((total + did))
    table=$(kubectl -n "$NS" get job "$job" 2>/dev/null) || table=''
    status=$(pj_column_of "$table" STATUS)
    got=$(pj_column_of "$table" COMPLETIONS)
    by=$(kubectl -n "$NS" get job "$job" -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name} {.spec.managedBy}' 2>/dev/null) || by=''
    if [ "$status" = Complete ] && [ "$got" = "3/1 of 3" ] && [ "$by" = "CronJob/$name paralleljob.dev/job-controller" ]; then
      results+=("${G}ok${N}   $(printf '%-22s %-10s %-10s (seed: 3/1 of 3; job/%s: %s items, managedBy %s)' "$name" "$status" "$got" "$job" "$did" "${by#* }")")
    else
      results+=("${R}FAIL${N} $(printf '%-22s %-10s %-10s (seed: Complete 3/1 of 3; job/%s owned by CronJob/%s, managedBy paralleljob.dev/job-controller: %s)' "$name" "$status" "$got" "$job" "$name" "$by")")
    fi
  done
  if [ "$total" != "$items" ]; then
    results+=("${R}FAIL${N} $(printf '%-22s %s of %s items done by its scheduled Jobs' "$name" "$total" "$items")")
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

say "3. A parallel work queue: completions unset, parallelism 3, draining a Redis stream"
echo "The queue first: Redis, and a producer Job that enqueues 36 items ($WORKQUEUE)"
show kubectl apply -k "$WORKQUEUE"
show kubectl rollout status deployment/redis --timeout="${STEP_TIMEOUT}s" || true
show kubectl wait --for=condition=Complete job/enqueue-items --timeout="${STEP_TIMEOUT}s" || true
show kubectl exec deploy/redis -- redis-cli XLEN items || true
echo
echo "Then the workers: each pod runs paralleljob-worker, one sha256 per item into the hash \"results\""
show kubectl apply -f "$WORKQUEUE/multi-workqueue-job.yaml"
watch_pj multi-workqueue-job queue || true
check multi-workqueue-job "3/1 of 3"
check_queue multi-workqueue-job
echo
echo "Each worker exited 0 only once nothing was left undelivered or pending:"
show kubectl logs -l app.kubernetes.io/name=multi-workqueue-job --prefix --tail=1 || true
show kubectl exec deploy/redis -- redis-cli HGET results item-001 || true

say "   parallelism can change at run time; on a finished work queue only the display follows"
show kubectl patch pj multi-workqueue-job --type=merge -p '{"spec": {"parallelism": 1}}'
wait_observed multi-workqueue-job || true
show kubectl get pj
check multi-workqueue-job "3/1"
show kubectl patch pj multi-workqueue-job --type=merge -p '{"spec": {"parallelism": 2}}'
wait_observed multi-workqueue-job || true
show kubectl get pj
check multi-workqueue-job "3/1 of 2"

say "4. A one-at-a-time work queue: completions unset, parallelism 1, raised to 2 while it runs"
echo "40 more items on the same stream, by the same producer CLI:"
show kubectl create job enqueue-more --image="$WORKER_IMAGE" -- \
  sh -c 'seq -f item-%03g 37 76 | paralleljob-worker enqueue --redis redis://redis:6379/0 --stream items'
show kubectl wait --for=condition=Complete job/enqueue-more --timeout="${STEP_TIMEOUT}s" || true
queue_read
done_before=${Q_RESULTS//-/0}
show kubectl apply -f "$WORKQUEUE/single-workqueue-job.yaml"
echo "One worker drains the queue; once it has done a few items:"
wait_results single-workqueue-job $((done_before + 4)) || true
show kubectl get pj single-workqueue-job
show kubectl patch pj single-workqueue-job --type=merge -p '{"spec": {"parallelism": 2}}'
watch_pj single-workqueue-job queue || true
check single-workqueue-job "2/1 of 2"
check_queue single-workqueue-job

say "5. Workload 3 started again by a CronJob: a Job every minute, run by the operator (managedBy)"
demo_ns=$NS
NS=$CRON_NS
kubectl delete namespace "$NS" --ignore-not-found --wait --timeout=120s >/dev/null
kubectl create namespace "$NS" >/dev/null
echo "namespace/$NS created: Redis, the producer (36 items) and the CronJob, in one go ($CRONJOB)"
show kubectl apply -k "$CRONJOB"
show kubectl rollout status deployment/redis --timeout="${STEP_TIMEOUT}s" || true
show kubectl wait --for=condition=Complete job/enqueue-items --timeout="${STEP_TIMEOUT}s" || true
echo
echo "A worker exits 0 once the queue is empty, so a Job cannot wait for later items: the CronJob"
echo "(schedule '* * * * *', concurrencyPolicy Forbid) starts one every minute, the next at $(date -d "@$(( ($(date +%s) / 60 + 1) * 60 ))" +%H:%M:%S):"
watch_cron "$CRON_NAME" 36 || true
check_cron_job "$CRON_NAME" "" 36
check_queue "$CRON_NAME's first batch"
echo
echo "40 more items, once the queue is empty and no Job runs:"
before=$(cron_jobs) || before=''
show kubectl create job enqueue-more --image="$WORKER_IMAGE" -- \
  sh -c 'seq -f item-%03g 37 76 | paralleljob-worker enqueue --redis redis://redis:6379/0 --stream items'
show kubectl wait --for=condition=Complete job/enqueue-more --timeout="${STEP_TIMEOUT}s" || true
echo "The next minute's Job drains them:"
watch_cron "$CRON_NAME" 76 || true
check_cron_job "$CRON_NAME" "$before" 40
check_queue "$CRON_NAME's second batch"
show kubectl get cronjob,jobs
NS=$demo_ns

say "6. Beyond the Job: a pod that never starts fails at its deadline (spec.podStartDeadlineSeconds)"
echo "$EXAMPLES/pod-start-deadline.yaml with a nodeSelector no node has, and a 10 s deadline;"
echo "its podFailurePolicy fails the job at the first such pod (a FailJob rule on the condition):"
kubectl patch --local -f "$EXAMPLES/pod-start-deadline.yaml" --type=merge -o yaml -p \
  '{"spec":{"podStartDeadlineSeconds":10,"template":{"spec":{"nodeSelector":{"paralleljob.dev/demo":"no-such-node"}}}}}' \
  | kubectl -n "$NS" apply -f -
watch_pj pod-start-deadline || true
check pod-start-deadline "0/3" Failed
show kubectl get events --field-selector reason=PodStartDeadlineExceeded || true
show kubectl get pj pod-start-deadline -o jsonpath='{.status.conditions[?(@.type=="Failed")].message}{"\n"}' || true

say "7. Beyond the Job: scaling down stops the idle workers, never a busy one (pod-deletion-cost)"
demo_ns=$NS
NS=$SCALE_NS
kubectl delete namespace "$NS" --ignore-not-found --wait --timeout=120s >/dev/null
kubectl create namespace "$NS" >/dev/null
echo "namespace/$NS created: Redis, the workers' RBAC ($SCALEDOWN/rbac.yaml) and three long items"
show kubectl apply -f "$WORKQUEUE/redis.yaml" -f "$SCALEDOWN/rbac.yaml"
show kubectl rollout status deployment/redis --timeout="${STEP_TIMEOUT}s" || true
show kubectl create job enqueue-long --image="$WORKER_IMAGE" -- \
  sh -c 'seq -f long-%03g 1 3 | paralleljob-worker enqueue --redis redis://redis:6379/0 --stream items'
show kubectl wait --for=condition=Complete job/enqueue-long --timeout="${STEP_TIMEOUT}s" || true
echo
echo "Six workers with --deletion-cost for three items of 30 s ($SCALEDOWN/$SCALE_NAME.yaml,"
echo "parallelism 6, the item's sleep 30 s): three busy (cost 100), three idle (cost -100):"
sed -e 's/^  parallelism: 3$/  parallelism: 6/' -e 's/time.sleep(0.5)/time.sleep(30)/' \
  "$SCALEDOWN/$SCALE_NAME.yaml" | kubectl -n "$NS" apply -f -
wait_costs "$SCALE_NAME" 3 3 || true
show kubectl get pods -l "app.kubernetes.io/name=$SCALE_NAME" \
  -o "custom-columns=NAME:.metadata.name,COST:.metadata.annotations.${COST_ANNOTATION//./\\.},PHASE:.status.phase"
costs=$(pod_costs "$SCALE_NAME")
busy=$(sed -n 's/=100$//p' <<<"$costs" | sort)
idle=$(sed -n 's/=-100$//p' <<<"$costs" | sort)
show kubectl patch pj "$SCALE_NAME" --type=merge -p '{"spec":{"parallelism":3}}'
watch_pj "$SCALE_NAME" queue || true
left=$(kubectl -n "$NS" get pods -l "app.kubernetes.io/name=$SCALE_NAME" -o name 2>/dev/null | sed 's|^pod/||' | sort)
check "$SCALE_NAME" "3/1 of 3"
check_queue "$SCALE_NAME"
if [ -n "$busy" ] && [ "$left" = "$busy" ] && [ -z "$(comm -12 <(echo "$left") <(echo "$idle"))" ]; then
  results+=("${G}ok${N}   $(printf '%-22s the 3 idle workers stopped, the 3 busy ones finished their items' "$SCALE_NAME")")
else
  results+=("${R}FAIL${N} $(printf '%-22s busy [%s] idle [%s] left [%s]' "$SCALE_NAME" "${busy//$'\n'/ }" "${idle//$'\n'/ }" "${left//$'\n'/ }")")
fi
NS=$demo_ns

say "8. Beyond the Job: a failed job restarted from nothing (spec.restartPolicy)"
echo "Its first attempt's pods fail, backoffLimit 0 fails the attempt, the job restarts; the"
echo "second attempt's pods (label paralleljob.dev/restart-attempt=1) succeed ($EXAMPLES/job-restarts.yaml):"
show kubectl apply -f "$EXAMPLES/job-restarts.yaml"
watch_pj job-restarts || true
check job-restarts "2/2"
show kubectl get pods -l app.kubernetes.io/name=job-restarts -L paralleljob.dev/restart-attempt || true
show kubectl get events --field-selector involvedObject.name=job-restarts,reason=Restarted || true
restarts=$(kubectl -n "$NS" get pj job-restarts -o jsonpath='{.status.restarts}' 2>/dev/null) || restarts=''
if [ "$restarts" = 1 ]; then
  results+=("${G}ok${N}   $(printf '%-22s status.restarts 1' job-restarts)")
else
  results+=("${R}FAIL${N} $(printf '%-22s status.restarts %s (want 1)' job-restarts "$restarts")")
fi

# --- 3. summary -----------------------------------------------------------------
say "The ParallelJobs, as kubectl prints them"
show kubectl get pj
show kubectl get pods
show kubectl exec deploy/redis -- redis-cli XINFO GROUPS items || true

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
  echo "  kubectl -n $NS exec deploy/redis -- redis-cli HGETALL results"
  echo "  kubectl -n $CRON_NS get cronjob,jobs   # a Job every minute; stop it: kubectl -n $CRON_NS patch cronjob $CRON_NAME -p '{\"spec\":{\"suspend\":true}}'"
  echo "Stop it:  make cluster-down   (and the docker engine that built the image: make docker-down)"
elif [ -n "${PJ_IMAGE_LOCAL_BUILD:-}" ]; then  # kind here (use_kind_here)
  echo "  eval \"\$(hack/kind.sh env)\"   # docker, kind, kubectl and KUBECONFIG for it"
  echo "  kubectl --context $KUBE_CONTEXT -n $NS get pj,pods"
  echo "Stop it:  make kind-down   (and kind's docker engine too: make kind-off)"
else
  echo "  kubectl --context $KUBE_CONTEXT -n $NS get pj,pods"
  echo "Stop it:  make undeploy   (the whole kind cluster: kind delete cluster --name $KIND_CLUSTER_NAME)"
fi
exit $failed
