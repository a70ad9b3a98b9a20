# shellcheck shell=bash disable=SC2034  # sourced: the variables are used by the sourcing scripts
# Names, paths and addresses of the local cluster, shared by cluster-up.sh,
# cluster-down.sh and load-image.sh. Source it after lib.sh; do not run it.

CLUSTER_DIR=$REPO_ROOT/.cluster
PKI_DIR=$CLUSTER_DIR/pki
PID_DIR=$CLUSTER_DIR/pids
LOG_DIR=$CLUSTER_DIR/logs
KUBECONFIG_ADMIN=$CLUSTER_DIR/kubeconfig
CONTAINERD_DIR=$CLUSTER_DIR/containerd
CONTAINERD_SOCK=$CONTAINERD_DIR/containerd.sock
KUBELET_DIR=$CLUSTER_DIR/kubelet
CNI_CONF_DIR=$CLUSTER_DIR/cni/net.d
CNI_BIN_DIR=/usr/lib/cni

KUBE_BIN=$CACHE_DIR/kubernetes-$KUBERNETES_VERSION/bin
ETCD_BIN=$CACHE_DIR/etcd-$ETCD_VERSION/bin/etcd
KWOK_BIN=$CACHE_DIR/kwok-$KWOK_VERSION/bin/kwok
COREDNS_BIN=$CACHE_DIR/coredns-$COREDNS_VERSION/bin/coredns

# Addresses. The bridge is created by cluster-up (not by the CNI plugin) so
# that the apiserver, kubelet and CoreDNS can bind to its gateway address
# before the first pod exists: pods reach the host there, and nothing of the
# cluster listens on the machine's external interface.
BRIDGE=pjbr0
POD_CIDR=10.244.0.0/24
CLUSTER_CIDR=10.244.0.0/16
BRIDGE_IP=10.244.0.1
SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SERVICE_IP=10.96.0.1
DNS_SERVICE_IP=10.96.0.10
# kwok pods get made-up IPs from here; an "unreachable" route keeps any
# connection attempt to them on this host instead of the default gateway.
KWOK_CIDR=10.245.0.0/16
KWOK_NODE_IP=10.245.255.254
APISERVER_PORT=6443
APISERVER_URL=https://$BRIDGE_IP:$APISERVER_PORT

REAL_NODE=real-node-0
KWOK_NODE=kwok-node-0

# The cgroup parent of every pod on the real node, so cleanup knows exactly
# which cgroups are the cluster's.
CGROUP_ROOT=paralleljob-local-cluster

# Our iptables chains (everything else is KUBE-* from kubelet/kube-proxy).
IPT_FORWARD_CHAIN=PJ-LOCAL-FORWARD
IPT_MASQ_CHAIN=PJ-LOCAL-MASQ
# A test's slow link to the API server (tests/support/slow_link.py), should it die first.
IPT_TEST_CHAIN=PJ-TEST-SLOW-LINK

# Components in start order; cluster-down stops them in reverse.
COMPONENTS=(etcd containerd kube-apiserver kube-controller-manager kube-scheduler coredns kube-proxy kubelet kwok)

# TCP/UDP listeners the cluster needs, as proto:address:port. A port already
# taken by something else is reported before anything starts.
LISTENERS=(
  tcp:127.0.0.1:2379 tcp:127.0.0.1:2380
  "tcp:$BRIDGE_IP:$APISERVER_PORT"
  tcp:127.0.0.1:10257 tcp:127.0.0.1:10259
  "tcp:$BRIDGE_IP:10250" tcp:127.0.0.1:10248
  tcp:127.0.0.1:10249 tcp:127.0.0.1:10256
  "udp:$BRIDGE_IP:53" "tcp:$BRIDGE_IP:53" tcp:127.0.0.1:10054
)

export KUBECONFIG=$KUBECONFIG_ADMIN
export PATH=$KUBE_BIN:$PATH

ctr_() { ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }

# pid_alive NAME: true when the pid file's process is alive and still runs
# the binary recorded next to it (a recycled PID is not ours).
pid_alive() {
  local file=$PID_DIR/$1.pid pid exe
  [ -f "$file" ] || return 1
  read -r pid exe <"$file" || return 1
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  [ "$(readlink "/proc/$pid/exe" 2>/dev/null | sed 's/ (deleted)$//')" = "$(readlink -f "$exe")" ]
}

# The pid of a component if pid_alive, else nothing.
pid_of() {
  local pid exe
  pid_alive "$1" && read -r pid exe <"$PID_DIR/$1.pid" && echo "$pid"
}

# stop NAME...: SIGTERM (or $STOP_SIGNAL) to each pid on file, then SIGKILL to
# whatever is still alive after a grace period. Given together, they stop in
# parallel.
# running PID: exists and is not a zombie (whose reaping is not ours to wait for).
# A zombie thread-group leader whose other threads are still exiting is running:
# they share its files, so its listening sockets close only with the last of them
# (a kube-controller-manager restarted after a SIGKILL found its port in use).
running() {
  [ -d "/proc/$1" ] || return 1
  grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null || return 0
  local tasks=("/proc/$1/task/"*)
  [ "${#tasks[@]}" -gt 1 ]
}

stop() {
  local name pid deadline pids=() names=()
  for name in "$@"; do
    if pid=$(pid_of "$name"); then
      log "cluster: stopping $name (pid $pid, SIG${STOP_SIGNAL:-TERM})"
      kill -"${STOP_SIGNAL:-TERM}" "$pid" 2>/dev/null || true
      pids+=("$pid") names+=("$name")
    fi
    rm -f "$PID_DIR/$name.pid"
  done
  deadline=$((SECONDS + ${STOP_GRACE_SECONDS:-15}))
  for i in "${!pids[@]}"; do
    while running "${pids[$i]}" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    if running "${pids[$i]}"; then
      log "cluster: ${names[$i]} did not stop in ${STOP_GRACE_SECONDS:-15}s, killing it"
      kill -KILL "${pids[$i]}" 2>/dev/null || true
      while running "${pids[$i]}"; do sleep 0.1; done
    fi
  done
}
