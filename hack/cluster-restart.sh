#!/usr/bin/env bash
# Restarts one component of the running local cluster, by its pid file, for the
# chaos tests (tests/chaos): stops it (SIGTERM, or SIGKILL with --kill), keeps it
# down for --down SECONDS (an outage of that length), starts it again with the same
# function cluster-up.sh uses, and waits until it answers again. After kube-apiserver,
# kwok is restarted too (restart_kwok says why).
# Usage: hack/cluster-restart.sh NAME [--down SECONDS] [--kill]
#   NAME: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
#         kube-proxy, coredns or kwok
#   kube-controller-manager restarts without the built-in Job controller with
#   PJ_BUILTIN_JOB_CONTROLLER=off, with it otherwise (on, the default)
source "$(dirname "${BASH_SOURCE[0]}")/cluster-up.sh"

usage() { die "usage: hack/cluster-restart.sh NAME [--down SECONDS] [--kill]"; }

# start_component NAME: cluster-up.sh's start function of NAME.
start_component() {
  case $1 in
    etcd) start_etcd ;;
    kube-apiserver) start_apiserver ;;
    kube-controller-manager) start_controller_manager ;;
    kube-scheduler) start_scheduler ;;
    kubelet) start_kubelet ;;
    kube-proxy) start_kube_proxy ;;
    coredns) start "coredns" "$COREDNS_BIN" -conf "$CLUSTER_DIR/Corefile" ;;
    kwok) start_kwok ;;
    *) usage ;;
  esac
}

# answers NAME: the component's own health check passes.
answers() {
  case $1 in
    etcd) curl -fsS http://127.0.0.1:2379/health ;;
    kube-apiserver) kubectl get --raw /readyz ;;
    kube-controller-manager) curl -kfsS https://127.0.0.1:10257/healthz ;;
    kube-scheduler) curl -kfsS https://127.0.0.1:10259/healthz ;;
    kubelet) curl -fsS http://127.0.0.1:10248/healthz ;;
    kube-proxy) curl -fsS http://127.0.0.1:10256/healthz ;;
    coredns) curl -fsS http://127.0.0.1:10054/health ;;
    kwok) node_ready "$KWOK_NODE" && kwok_holds_lease ;;
  esac
}

# kwok names a new holder of its node's Lease in each process, so a restarted kwok
# would play none of the node's pods until its predecessor's Lease expired
# (--node-lease-duration-seconds, 40 s); a kubelet, whose identity is its node's name,
# renews its own at once. The stopped kwok's Lease is deleted, as if it had let go.
release_kwok_lease() {
  kubectl -n kube-node-lease delete lease "$KWOK_NODE" --ignore-not-found >/dev/null
}

kwok_holds_lease() { kubectl -n kube-node-lease get lease "$KWOK_NODE" >/dev/null 2>&1; }

# restart_kwok: a fresh kwok. While the API server is down, kwok's client-go reflectors
# back off (0.8 s doubling to 30 s, plus as much jitter, and reset only after 2 min
# without a failure: tools/cache/reflector.go), so the simulated node played no pod for
# 30-90 s after the server was back, and a test could only wait. A fresh process lists
# and watches at once; the operator under test reconnects on its own.
restart_kwok() {
  stop kwok
  release_kwok_lease
  start_kwok
  wait_for kwok 60 answers kwok
}

restart_main() {
  local name=${1:-} down=0
  [ -n "$name" ] || usage
  shift
  while [ $# -gt 0 ]; do
    case $1 in
      --down) down=${2:-}; shift 2 ;;
      --kill) export STOP_SIGNAL=KILL; shift ;;  # read by stop (cluster-env.sh)
      *) usage ;;
    esac
  done
  [[ $down =~ ^[0-9]+(\.[0-9]+)?$ ]] || usage
  pid_alive "$name" || die "$name is not running (no live pid in $PID_DIR/$name.pid)"
  # A wrong PJ_BUILTIN_JOB_CONTROLLER fails before the component is stopped.
  [ "$name" != kube-controller-manager ] || controllers >/dev/null
  # kube-apiserver lingers after SIGTERM until the 15 s of a full stop run out (it stops
  # listening at once, then waits on connections); a restart need not wait that long.
  STOP_GRACE_SECONDS=${STOP_GRACE_SECONDS:-5} stop "$name"
  # The outage itself: the component stays down this long on purpose.
  sleep "$down"
  [ "$name" != kwok ] || release_kwok_lease
  start_component "$name"
  wait_for "$name" 120 answers "$name"
  [ "$name" != kube-apiserver ] || restart_kwok
  log "cluster: $name restarted (pid $(pid_of "$name"))"
}

restart_main "$@"
