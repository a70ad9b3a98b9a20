# shellcheck shell=bash
# Sourced by the scripts that run an upstream suite against either Job
# controller of the local cluster (hack/test-upstream.sh, hack/test-kueue.sh):
# switching kube-controller-manager's Job controller on or off, and the
# operator on the host reconciling every batch/v1 Job. Needs lib.sh and
# cluster-env.sh sourced first.

OPERATOR_BIN=$REPO_ROOT/.venv/bin/paralleljob-operator

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
  log "restarting kube-controller-manager with PJ_BUILTIN_JOB_CONTROLLER=$1"
  PJ_BUILTIN_JOB_CONTROLLER=$1 "$HACK_DIR/cluster-restart.sh" kube-controller-manager
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# operator_alive DIR: DIR/operator.pid's process is alive and still the operator.
operator_alive() {
  local pid
  [ -f "$1/operator.pid" ] && read -r pid <"$1/operator.pid" && [ -d "/proc/$pid" ] &&
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$OPERATOR_BIN"
}

# start_operator DIR: the operator on the host as tests/e2e runs it, for every
# namespace and every Job: no leader election, the cluster admin's kubeconfig;
# its PID file, log and kubeconfig certificates' temporary files in DIR.
start_operator() {
  local dir=$1 port metrics_port deadline
  [ -x "$OPERATOR_BIN" ] || die "$OPERATOR_BIN is missing: run 'make venv'"
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
  mkdir -p "$dir/operator-tmp"
  PJ_MANAGE_JOBS=all PJ_LEADER_ELECT=false KUBECONFIG=$KUBECONFIG_ADMIN PYTHONUNBUFFERED=1 \
    TMPDIR=$dir/operator-tmp setsid "$OPERATOR_BIN" --bind-address 127.0.0.1 \
    --liveness-port "$port" --metrics-port "$metrics_port" </dev/null >"$dir/operator.log" 2>&1 &
  echo "$!" >"$dir/operator.pid"
  deadline=$((SECONDS + 60))
  until curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do
    if ! operator_alive "$dir"; then
      tail -n 25 "$dir/operator.log" >&2
      die "the operator exited during startup (log: $dir/operator.log)"
    fi
    [ "$SECONDS" -lt "$deadline" ] || die "the operator's /healthz did not answer in 60s (log: $dir/operator.log)"
    sleep 0.5
  done
  log "operator running (pid $(cat "$dir/operator.pid"), PJ_MANAGE_JOBS=all," \
    "metrics on 127.0.0.1:$metrics_port, log $dir/operator.log)"
}

# stop_operator DIR: stops the operator DIR/operator.pid names, if it runs.
stop_operator() {
  operator_alive "$1" || return 0
  terminate "$(cat "$1/operator.pid")" paralleljob-operator
  rm -f "$1/operator.pid"
}
