#!/usr/bin/env bash
# Starts the single-host local cluster (see docs/local-cluster.md):
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, a real node
# (private containerd + runc, CNI bridge, kubelet, kube-proxy, CoreDNS) and a
# simulated kwok node. State lives in .cluster/; every process started gets a
# pid file there, which is all cluster-down.sh uses to stop it.
# One function per component, as in Kubernetes' hack/local-up-cluster.sh;
# main at the bottom. Their configs are templates in hack/cluster/, rendered
# into .cluster/ with the values of hack/cluster-env.sh (render, hack/lib.sh).
# Usage: hack/cluster-up.sh     (idempotent: a running cluster is left alone)
# Sourced (hack/cluster-restart.sh), it only defines its functions.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_DIR/cluster-env.sh"

START=$SECONDS
step() { log "cluster: $* (+$((SECONDS - START))s)"; }

# ---------------------------------------------------------------- checks

check_prereqs() {
  local bin cmd plugin
  [ "$(id -u)" -eq 0 ] || die "the local cluster needs root (network namespaces, mounts, iptables, cgroups)"
  for bin in "$KUBE_BIN/kube-apiserver" "$KUBE_BIN/kubelet" "$KUBE_BIN/kubectl" "$ETCD_BIN" "$KWOK_BIN" "$COREDNS_BIN"; do
    [ -x "$bin" ] || die "$bin is missing: run 'make build' (hack/build.sh)"
  done
  for cmd in containerd containerd-shim-runc-v2 ctr runc iptables ip6tables conntrack ip nsenter openssl gcc; do
    require_cmd "$cmd" "run 'make prereqs' (hack/install-prereqs.sh)"
  done
  for plugin in bridge host-local loopback portmap; do
    [ -x "$CNI_BIN_DIR/$plugin" ] || die "CNI plugin $CNI_BIN_DIR/$plugin is missing: run 'make prereqs'"
  done
}

# alive_components: how many components have a pid file naming a live process.
alive_components() {
  local c n=0
  for c in "${COMPONENTS[@]}"; do
    pid_alive "$c" && n=$((n + 1))
  done
  echo "$n"
}

# cluster_running: every component alive and the apiserver ready.
cluster_running() {
  [ "$(alive_components)" -eq ${#COMPONENTS[@]} ] && kubectl get --raw /readyz >/dev/null 2>&1
}

report_running() {
  log "cluster: already running ($(kubectl get nodes --no-headers 2>/dev/null | awk '{printf "%s %s; ", $1, $2}'))"
  local want running
  want=$(controllers)
  running=$(tr '\0' '\n' <"/proc/$(pid_of kube-controller-manager)/cmdline" | sed -n 's/^--controllers=//p')
  [ "$running" = "$want" ] || log "cluster: kube-controller-manager runs --controllers=$running, not $want;" \
    "restart it: PJ_BUILTIN_JOB_CONTROLLER=${PJ_BUILTIN_JOB_CONTROLLER:-on} hack/cluster-restart.sh kube-controller-manager"
  echo "$KUBECONFIG_ADMIN"
}

# clean_up_leftovers: a half-started or crashed cluster is stopped and
# cleaned up (by pid file, hack/cluster-down.sh) before anything starts.
clean_up_leftovers() {
  local c any=0
  for c in "${COMPONENTS[@]}"; do
    [ -f "$PID_DIR/$c.pid" ] && any=1
  done
  if [ "$any" -eq 1 ] || ip link show "$BRIDGE" >/dev/null 2>&1; then
    log "cluster: a partial cluster is left over ($(alive_components)/${#COMPONENTS[@]} components alive); cleaning it up"
    "$HACK_DIR/cluster-down.sh"
  fi
}

# check_ports: a port held by something else is reported now instead of a
# component failing (or waiting) later.
check_ports() {
  local l proto addr port flag holders busy=()
  for l in "${LISTENERS[@]}"; do
    IFS=: read -r proto addr port <<<"$l"
    flag=-t; [ "$proto" = udp ] && flag=-u
    holders=$(ss -H -l -n -p "$flag" "( sport = :$port )" 2>/dev/null |
      awk -v a="$addr" '$4 ~ "^(" a "|0\\.0\\.0\\.0|\\*|\\[::\\]):" {print $4, $6}')
    [ -n "$holders" ] && busy+=("$proto $addr:$port is in use: $holders")
  done
  if [ ${#busy[@]} -gt 0 ]; then
    printf 'error: %s\n' "${busy[@]}" >&2
    die "free the ports above (or stop what holds them) and rerun"
  fi
}

# ---------------------------------------------------------------- host setup

prepare_dirs() {
  local f
  mkdir -p "$PID_DIR" "$LOG_DIR" "$PKI_DIR" "$CNI_CONF_DIR" "$CONTAINERD_DIR" "$KUBELET_DIR" "$CLUSTER_DIR/etcd"
  # Fresh logs for this run; the previous run's stay as *.log.prev.
  for f in "$LOG_DIR"/*.log; do
    if [ -e "$f" ]; then mv -f "$f" "$f.prev"; fi
  done
}

# Each step tolerates a leftover of a previous run.
setup_host_network() {
  # Pods on the bridge reach Services and the world through the host.
  sysctl -qw net.ipv4.ip_forward=1
  [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || modprobe br_netfilter 2>/dev/null ||
    die "kernel module br_netfilter is unavailable (kube-proxy needs bridged traffic to traverse iptables)"
  sysctl -qw net.bridge.bridge-nf-call-iptables=1

  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip addr replace "$BRIDGE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  ip route replace unreachable "$KWOK_CIDR"
  # A Service IP exists only as kube-proxy's DNAT rules: until it has written a new
  # Service's, a packet to that IP followed the default route off the host, and a
  # Redis client met an HTTP proxy there ("HTTP/1.1 400 Bad Request"). Routed to the
  # bridge it stays on the host and fails as unreachable, which clients retry.
  ip route replace "$SERVICE_CIDR" dev "$BRIDGE"

  # Accept traffic from and to the pod bridge even if something (e.g. dockerd)
  # set the FORWARD policy to DROP; masquerade pods' traffic leaving the host.
  iptables -w -N "$IPT_FORWARD_CHAIN" 2>/dev/null || iptables -w -F "$IPT_FORWARD_CHAIN"
  iptables -w -A "$IPT_FORWARD_CHAIN" -i "$BRIDGE" -j ACCEPT
  iptables -w -A "$IPT_FORWARD_CHAIN" -o "$BRIDGE" -j ACCEPT
  iptables -w -C FORWARD -j "$IPT_FORWARD_CHAIN" 2>/dev/null || iptables -w -I FORWARD 1 -j "$IPT_FORWARD_CHAIN"
  iptables -w -t nat -N "$IPT_MASQ_CHAIN" 2>/dev/null || iptables -w -t nat -F "$IPT_MASQ_CHAIN"
  iptables -w -t nat -A "$IPT_MASQ_CHAIN" -s "$POD_CIDR" ! -o "$BRIDGE" -j MASQUERADE
  iptables -w -t nat -C POSTROUTING -j "$IPT_MASQ_CHAIN" 2>/dev/null || iptables -w -t nat -A POSTROUTING -j "$IPT_MASQ_CHAIN"
}

# Every pod cgroup of the real node lives under this parent.
setup_cgroups() {
  local hierarchy
  for hierarchy in /sys/fs/cgroup/*/; do
    [ -e "$hierarchy/cgroup.procs" ] && [ ! -e "$hierarchy/cgroup.controllers" ] || continue
    mkdir -p "$hierarchy$CGROUP_ROOT"
    # A new v1 cpuset cgroup starts with no CPUs and no memory nodes.
    if [ -e "$hierarchy/cpuset.cpus" ]; then
      cat "$hierarchy/cpuset.cpus" >"$hierarchy$CGROUP_ROOT/cpuset.cpus"
      cat "$hierarchy/cpuset.mems" >"$hierarchy$CGROUP_ROOT/cpuset.mems"
    fi
  done
}

# ---------------------------------------------------------------- PKI

cert_conf() {
  cat <<EOF
[req]
distinguished_name = dn
[dn]
[ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = $1
${2:+subjectAltName = $2}
EOF
}
new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
# new_ca NAME SUBJECT: a self-signed CA, NAME.crt and NAME.key.
new_ca() {
  new_key "$PKI_DIR/$1.key"
  openssl req -x509 -new -key "$PKI_DIR/$1.key" -subj "$2" -days 3650 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$PKI_DIR/$1.crt" 2>/dev/null
}
# [CA=NAME] issue NAME SUBJECT EXTENDED_KEY_USAGE [SUBJECT_ALT_NAMES]
# signed by the cluster CA, or by the CA named in $CA.
issue() {
  local name=$1 subject=$2 eku=$3 sans=${4:-} ca=${CA:-ca}
  new_key "$PKI_DIR/$name.key"
  openssl req -new -key "$PKI_DIR/$name.key" -subj "$subject" -out "$PKI_DIR/$name.csr" 2>/dev/null
  openssl x509 -req -in "$PKI_DIR/$name.csr" -CA "$PKI_DIR/$ca.crt" -CAkey "$PKI_DIR/$ca.key" \
    -CAcreateserial -days 3650 -extensions ext -extfile <(cert_conf "$eku" "$sans") \
    -out "$PKI_DIR/$name.crt" 2>/dev/null
  rm -f "$PKI_DIR/$name.csr"
}

issue_certificates() {
  new_ca ca "/CN=paralleljob-local-ca"
  new_key "$PKI_DIR/sa.key"
  openssl pkey -in "$PKI_DIR/sa.key" -pubout -out "$PKI_DIR/sa.pub" 2>/dev/null

  issue apiserver "/CN=kube-apiserver" serverAuth \
    "IP:$BRIDGE_IP,IP:$KUBERNETES_SERVICE_IP,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  issue apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  issue admin "/O=system:masters/CN=kubernetes-admin" clientAuth
  issue controller-manager "/CN=system:kube-controller-manager" clientAuth
  issue scheduler "/CN=system:kube-scheduler" clientAuth
  issue kube-proxy "/CN=system:kube-proxy" clientAuth
  issue kubelet "/O=system:nodes/CN=system:node:$REAL_NODE" clientAuth
  issue kubelet-serving "/CN=$REAL_NODE" serverAuth "IP:$BRIDGE_IP,DNS:$REAL_NODE"
  issue coredns "/CN=system:coredns" clientAuth
  # kwok plays the kubelet of any number of nodes and their pods; the node
  # authorizer only admits one node per identity, so kwok is cluster-admin
  # (as in kwok's own deployment manifests).
  issue kwok "/O=system:masters/CN=kwok-controller" clientAuth

  # The API aggregation layer, as kubeadm sets it up: the apiserver proxies
  # requests to aggregated APIs (apiregistration.k8s.io APIServices) with this
  # client certificate, from a CA of its own; aggregated API servers trust
  # the X-Remote-User/-Group headers only from a client that CA signed.
  new_ca front-proxy-ca "/CN=front-proxy-ca"
  CA=front-proxy-ca issue front-proxy-client "/CN=front-proxy-client" clientAuth
}

# ---------------------------------------------------------------- configs
# Each prints a template of hack/cluster/ with the variables it may use.

# kubeconfig NAME: a kubeconfig with the client certificate NAME.
# shellcheck disable=SC2034 # the variables are read by render
kubeconfig() {
  local USER_NAME=$1 CA_DATA CERT_DATA KEY_DATA
  CA_DATA=$(base64 -w0 <"$PKI_DIR/ca.crt")
  CERT_DATA=$(base64 -w0 <"$PKI_DIR/$1.crt")
  KEY_DATA=$(base64 -w0 <"$PKI_DIR/$1.key")
  render "$HACK_DIR/cluster/kubeconfig.yaml" APISERVER_URL CA_DATA USER_NAME CERT_DATA KEY_DATA
}
containerd_config() {
  render "$HACK_DIR/cluster/containerd.toml" CONTAINERD_DIR CONTAINERD_SOCK PAUSE_IMAGE CNI_BIN_DIR CNI_CONF_DIR
}
cni_config() { render "$HACK_DIR/cluster/cni.conflist" BRIDGE CLUSTER_DIR POD_CIDR BRIDGE_IP; }
corefile() { render "$HACK_DIR/cluster/Corefile" BRIDGE_IP CLUSTER_DIR; }
coredns_objects() { render "$HACK_DIR/cluster/coredns-objects.yaml" DNS_SERVICE_IP BRIDGE_IP; }
kube_proxy_config() { render "$HACK_DIR/cluster/kube-proxy.yaml" CLUSTER_DIR REAL_NODE CLUSTER_CIDR BRIDGE_IP; }
kubelet_config() {
  render "$HACK_DIR/cluster/kubelet.yaml" BRIDGE_IP PKI_DIR CONTAINERD_SOCK CGROUP_ROOT DNS_SERVICE_IP CLUSTER_DIR
}
kwok_node() { render "$HACK_DIR/cluster/kwok-node.yaml" KWOK_NODE; }

write_kubeconfigs() {
  local c
  kubeconfig admin >"$KUBECONFIG_ADMIN"
  chmod 600 "$KUBECONFIG_ADMIN"
  for c in controller-manager scheduler kube-proxy kubelet coredns kwok; do
    kubeconfig "$c" >"$CLUSTER_DIR/$c.kubeconfig"
    chmod 600 "$CLUSTER_DIR/$c.kubeconfig"
  done
}

# ---------------------------------------------------------------- helpers

# start NAME BINARY ARGS...: runs detached (own session, so a Ctrl-C of
# make does not reach it), logs to .cluster/logs/NAME.log, records its pid
# and binary in .cluster/pids/NAME.pid.
start() {
  local name=$1
  shift
  setsid "$@" </dev/null >>"$LOG_DIR/$name.log" 2>&1 &
  echo "$! $1" >"$PID_DIR/$name.pid"
}

# wait_for NAME TIMEOUT COMMAND...: polls COMMAND until it succeeds; fails
# early, with the log's tail, if the component died.
wait_for() {
  local name=$1 timeout=$2 deadline
  shift 2
  deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ! pid_alive "$name"; then
      tail -n 25 "$LOG_DIR/$name.log" >&2
      die "$name exited during startup (log: $LOG_DIR/$name.log); clean up with 'make cluster-down'"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      tail -n 25 "$LOG_DIR/$name.log" >&2
      die "$name not ready after ${timeout}s (log: $LOG_DIR/$name.log); clean up with 'make cluster-down'"
    fi
    sleep 0.5
  done
}

# apply OBJECTS: kubectl apply of what the function OBJECTS prints. Under
# wait_for, a transient answer ("etcdserver: request timed out", a 429) is
# retried: apply is idempotent.
apply() {
  "$1" | kubectl apply -f -
}

node_ready() {
  [ "$(kubectl get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

# ---------------------------------------------------------------- images

# build_images: IMAGES (one "REF TARBALL" a line) and PAUSE_IMAGE, the
# sandbox image containerd is configured with (containerd_config).
# shellcheck disable=SC2034 # PAUSE_IMAGE is read by render
build_images() {
  mapfile -t IMAGES < <(python3 "$HACK_DIR/images/build_image.py" --cache-dir "$CACHE_DIR")
  PAUSE_IMAGE=$(printf '%s\n' "${IMAGES[@]}" | awk '$1 ~ /\/pause:/ {print $1}')
}

# Kubernetes' e2e suite (hack/test-upstream.sh) runs its pods on these names
# (`e2e.test --list-images`); the project's busybox answers to them, so that
# the suite never pulls.
E2E_BUSYBOX_IMAGES=(registry.k8s.io/e2e-test-images/busybox:1.37.0-2 registry.k8s.io/e2e-test-images/busybox:1.36.1-1)

import_images() {
  local line ref tarball busybox=
  for line in "${IMAGES[@]}"; do
    read -r ref tarball <<<"$line"
    ctr_ images import "$tarball" >/dev/null
    log "  $ref"
    if [[ $ref == */busybox:* ]]; then busybox=$ref; fi
  done
  [ -n "$busybox" ] || die "no busybox among the preloaded images"
  for ref in "${E2E_BUSYBOX_IMAGES[@]}"; do
    ctr_ images tag --force "$busybox" "$ref" >/dev/null
    log "  $ref (= $busybox)"
  done
}

# ---------------------------------------------------------------- components

# --unsafe-no-fsync: a throwaway test cluster on a machine whose 2 cores and
# disk the tests share. With fsync, a CI machine's etcd answered the first
# writes with "etcdserver: request timed out": a proposal not committed in
# time, which a slow WAL sync causes.
# Writes still reach the page cache, so a killed etcd (the chaos tests)
# restarts with its data; only a crash of the host could lose some.
start_etcd() {
  start etcd "$ETCD_BIN" --name local --data-dir "$CLUSTER_DIR/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster local=http://127.0.0.1:2380 \
    --quota-backend-bytes 4294967296 --unsafe-no-fsync --log-level warn
}

start_containerd() {
  containerd_config >"$CONTAINERD_DIR/config.toml"
  cni_config >"$CNI_CONF_DIR/10-paralleljob.conflist"
  start containerd "$(command -v containerd)" --config "$CONTAINERD_DIR/config.toml" --log-level warn
}

# The aggregation layer (--requestheader-*, --proxy-client-*; issue_certificates)
# with --enable-aggregator-routing: the aggregator dials an APIService's endpoint
# addresses (EndpointSlices: pod IPs on the bridge) instead of its ClusterIP. The
# API server runs on the host, where a ClusterIP is reachable only through
# kube-proxy's iptables rules; while they are missing (kube-proxy down, or a new
# Service not yet synced) a connection to it follows the default route off the
# machine (seen: the availability check, which skips TLS verification, got a
# 404 from outside).
# OwnerReferencesPermissionEnforcement, as hardened clusters (OpenShift) run it: an
# owner reference that blocks its owner's deletion needs update on the owner's
# finalizers, so the deployed operator's RBAC is tested under it.
start_apiserver() {
  start kube-apiserver "$KUBE_BIN/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 \
    --bind-address="$BRIDGE_IP" --secure-port="$APISERVER_PORT" --advertise-address="$BRIDGE_IP" \
    --tls-cert-file="$PKI_DIR/apiserver.crt" --tls-private-key-file="$PKI_DIR/apiserver.key" \
    --client-ca-file="$PKI_DIR/ca.crt" \
    --kubelet-client-certificate="$PKI_DIR/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI_DIR/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI_DIR/ca.crt" \
    --kubelet-preferred-address-types=InternalIP \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI_DIR/sa.pub" \
    --service-account-signing-key-file="$PKI_DIR/sa.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction,OwnerReferencesPermissionEnforcement \
    --requestheader-client-ca-file="$PKI_DIR/front-proxy-ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-username-headers=X-Remote-User \
    --proxy-client-cert-file="$PKI_DIR/front-proxy-client.crt" \
    --proxy-client-key-file="$PKI_DIR/front-proxy-client.key" \
    --enable-aggregator-routing=true \
    --audit-policy-file="$HACK_DIR/cluster/audit-policy.yaml" \
    --audit-log-path="$LOG_DIR/audit.log" --audit-log-maxsize=200 --audit-log-maxbackup=5 \
    --allow-privileged=true \
    --profiling=false \
    --v=1
}

# controllers: kube-controller-manager's --controllers. PJ_BUILTIN_JOB_CONTROLLER
# (on, the default, or off) says whether the built-in Job controller runs; off
# leaves the Jobs to another controller (the operator with PJ_MANAGE_JOBS=all,
# hack/test-upstream.sh). Every other default controller (cronjob,
# ttl-after-finished, the garbage collector, ...) runs either way.
controllers() {
  case ${PJ_BUILTIN_JOB_CONTROLLER:-on} in
    on) echo '*' ;;
    off) echo '*,-job-controller' ;;
    *) die "PJ_BUILTIN_JOB_CONTROLLER must be on or off, got '$PJ_BUILTIN_JOB_CONTROLLER'" ;;
  esac
}

start_controller_manager() {
  local controllers
  controllers=$(controllers)
  start kube-controller-manager "$KUBE_BIN/kube-controller-manager" \
    --kubeconfig="$CLUSTER_DIR/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$CLUSTER_DIR/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$CLUSTER_DIR/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=10257 \
    --root-ca-file="$PKI_DIR/ca.crt" \
    --service-account-private-key-file="$PKI_DIR/sa.key" \
    --cluster-signing-cert-file="$PKI_DIR/ca.crt" --cluster-signing-key-file="$PKI_DIR/ca.key" \
    --use-service-account-credentials=true \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --controllers="$controllers" \
    --leader-elect=false \
    --profiling=false \
    --v=1
}

start_scheduler() {
  start kube-scheduler "$KUBE_BIN/kube-scheduler" \
    --kubeconfig="$CLUSTER_DIR/scheduler.kubeconfig" \
    --authentication-kubeconfig="$CLUSTER_DIR/scheduler.kubeconfig" \
    --authorization-kubeconfig="$CLUSTER_DIR/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=10259 \
    --leader-elect=false \
    --profiling=false \
    --v=1
}

# CoreDNS on the host, published as kube-system/kube-dns (see
# hack/cluster/coredns-objects.yaml).
start_coredns() {
  corefile >"$CLUSTER_DIR/Corefile"
  wait_for kube-apiserver 60 apply coredns_objects
  start coredns "$COREDNS_BIN" -conf "$CLUSTER_DIR/Corefile"
}

start_kube_proxy() {
  kube_proxy_config >"$CLUSTER_DIR/kube-proxy.yaml"
  start kube-proxy "$KUBE_BIN/kube-proxy" --config="$CLUSTER_DIR/kube-proxy.yaml" --v=1
}

start_kubelet() {
  kubelet_config >"$CLUSTER_DIR/kubelet.yaml"
  start kubelet "$KUBE_BIN/kubelet" \
    --config="$CLUSTER_DIR/kubelet.yaml" \
    --kubeconfig="$CLUSTER_DIR/kubelet.kubeconfig" \
    --root-dir="$KUBELET_DIR" \
    --hostname-override="$REAL_NODE" \
    --node-ip="$BRIDGE_IP" \
    --node-labels=paralleljob.dev/node-type=real \
    --v=1
}

# The kwok node object, then kwok, which plays its kubelet.
start_kwok() {
  wait_for kube-apiserver 60 apply kwok_node
  start kwok "$KWOK_BIN" \
    --kubeconfig="$CLUSTER_DIR/kwok.kubeconfig" \
    --config="$HACK_DIR/cluster/kwok-stages.yaml" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-ip="$KWOK_NODE_IP" \
    --cidr="${KWOK_CIDR%.0/*}.1/${KWOK_CIDR#*/}" \
    --node-lease-duration-seconds=40
}

# ---------------------------------------------------------------- main

main() {
  check_prereqs
  controllers >/dev/null  # a wrong PJ_BUILTIN_JOB_CONTROLLER fails before anything starts
  # Running already? Then report it and touch nothing.
  if cluster_running; then
    report_running
    exit 0
  fi
  clean_up_leftovers
  check_ports

  step "preparing host networking"
  prepare_dirs
  setup_host_network
  setup_cgroups

  step "issuing certificates"
  issue_certificates
  write_kubeconfigs

  step "building the preloaded images (cached in $CACHE_DIR/images)"
  build_images

  step "starting etcd and containerd"
  start_etcd
  start_containerd
  wait_for etcd 30 curl -fsS http://127.0.0.1:2379/health
  wait_for containerd 30 ctr_ version

  step "importing images into the node's containerd"
  import_images

  step "starting kube-apiserver"
  start_apiserver
  wait_for kube-apiserver 60 kubectl get --raw /readyz

  step "starting controller-manager, scheduler, CoreDNS, kube-proxy, kubelet, kwok"
  start_controller_manager
  start_scheduler
  start_coredns
  start_kube_proxy
  start_kubelet
  start_kwok
  wait_for coredns 30 curl -fsS http://127.0.0.1:10054/health
  wait_for kube-proxy 30 curl -fsS http://127.0.0.1:10256/healthz
  wait_for kubelet 60 curl -fsS http://127.0.0.1:10248/healthz

  step "waiting for every node to be Ready"
  wait_for kubelet 90 node_ready "$REAL_NODE"
  wait_for kwok 60 node_ready "$KWOK_NODE"
  # Pods need their namespace's default ServiceAccount before they can be created.
  wait_for kube-controller-manager 30 kubectl get serviceaccount default -n default

  step "ready"
  kubectl get nodes -o wide >&2
  log "cluster: stop it with 'make cluster-down'; logs in $LOG_DIR"
  log "cluster: export KUBECONFIG=$KUBECONFIG_ADMIN"
  echo "$KUBECONFIG_ADMIN"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
