#!/usr/bin/env bash
# Starts the single-host local cluster (see README, "Local cluster"):
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, a real node
# (private containerd + runc, CNI bridge, kubelet, kube-proxy, CoreDNS) and a
# simulated kwok node. State lives in .cluster/; every process started gets a
# pid file there, which is all cluster-down.sh uses to stop it.
# Usage: hack/cluster-up.sh     (idempotent: a running cluster is left alone)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_DIR/cluster-env.sh"

START=$SECONDS
step() { log "cluster: $* (+$((SECONDS - START))s)"; }

# ---------------------------------------------------------------- checks

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

report_running() {
  log "cluster: already running ($(kubectl get nodes --no-headers 2>/dev/null | awk '{printf "%s %s; ", $1, $2}'))"
  echo "$KUBECONFIG_ADMIN"
}

# Running already? Then report it and touch nothing.
alive=0 any=0
for c in "${COMPONENTS[@]}"; do
  [ -f "$PID_DIR/$c.pid" ] && any=1
  pid_alive "$c" && alive=$((alive + 1))
done
if [ "$alive" -eq ${#COMPONENTS[@]} ] && kubectl get --raw /readyz >/dev/null 2>&1; then
  report_running
  exit 0
fi
# Half-started or crashed: clean up what is left first, by pid file.
if [ "$any" -eq 1 ] || ip link show "$BRIDGE" >/dev/null 2>&1; then
  log "cluster: a partial cluster is left over ($alive/${#COMPONENTS[@]} components alive); cleaning it up"
  "$HACK_DIR/cluster-down.sh"
fi

# A port held by something else is reported now instead of a component
# failing (or waiting) later.
busy=()
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

# ---------------------------------------------------------------- host setup

step "preparing host networking"
mkdir -p "$PID_DIR" "$LOG_DIR" "$PKI_DIR" "$CNI_CONF_DIR" "$CONTAINERD_DIR" "$KUBELET_DIR" "$CLUSTER_DIR/etcd"
# Fresh logs for this run; the previous run's stay as *.log.prev.
for f in "$LOG_DIR"/*.log; do [ -e "$f" ] && mv -f "$f" "$f.prev"; done

# Pods on the bridge reach Services and the world through the host.
sysctl -qw net.ipv4.ip_forward=1
[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || modprobe br_netfilter 2>/dev/null ||
  die "kernel module br_netfilter is unavailable (kube-proxy needs bridged traffic to traverse iptables)"
sysctl -qw net.bridge.bridge-nf-call-iptables=1

# Each step tolerates a leftover of a previous run.
ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
ip addr replace "$BRIDGE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
ip link set "$BRIDGE" up
ip route replace unreachable "$KWOK_CIDR"

# Accept traffic from and to the pod bridge even if something (e.g. dockerd)
# set the FORWARD policy to DROP; masquerade pods' traffic leaving the host.
iptables -w -N "$IPT_FORWARD_CHAIN" 2>/dev/null || iptables -w -F "$IPT_FORWARD_CHAIN"
iptables -w -A "$IPT_FORWARD_CHAIN" -i "$BRIDGE" -j ACCEPT
iptables -w -A "$IPT_FORWARD_CHAIN" -o "$BRIDGE" -j ACCEPT
iptables -w -C FORWARD -j "$IPT_FORWARD_CHAIN" 2>/dev/null || iptables -w -I FORWARD 1 -j "$IPT_FORWARD_CHAIN"
iptables -w -t nat -N "$IPT_MASQ_CHAIN" 2>/dev/null || iptables -w -t nat -F "$IPT_MASQ_CHAIN"
iptables -w -t nat -A "$IPT_MASQ_CHAIN" -s "$POD_CIDR" ! -o "$BRIDGE" -j MASQUERADE
iptables -w -t nat -C POSTROUTING -j "$IPT_MASQ_CHAIN" 2>/dev/null || iptables -w -t nat -A POSTROUTING -j "$IPT_MASQ_CHAIN"

# Every pod cgroup of the real node lives under this parent.
for hierarchy in /sys/fs/cgroup/*/; do
  [ -e "$hierarchy/cgroup.procs" ] && [ ! -e "$hierarchy/cgroup.controllers" ] || continue
  mkdir -p "$hierarchy$CGROUP_ROOT"
  # A new v1 cpuset cgroup starts with no CPUs and no memory nodes.
  if [ -e "$hierarchy/cpuset.cpus" ]; then
    cat "$hierarchy/cpuset.cpus" >"$hierarchy$CGROUP_ROOT/cpuset.cpus"
    cat "$hierarchy/cpuset.mems" >"$hierarchy$CGROUP_ROOT/cpuset.mems"
  fi
done

# ---------------------------------------------------------------- PKI

step "issuing certificates"
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
# issue NAME SUBJECT EXTENDED_KEY_USAGE [SUBJECT_ALT_NAMES]
issue() {
  local name=$1 subject=$2 eku=$3 sans=${4:-}
  new_key "$PKI_DIR/$name.key"
  openssl req -new -key "$PKI_DIR/$name.key" -subj "$subject" -out "$PKI_DIR/$name.csr" 2>/dev/null
  openssl x509 -req -in "$PKI_DIR/$name.csr" -CA "$PKI_DIR/ca.crt" -CAkey "$PKI_DIR/ca.key" \
    -CAcreateserial -days 3650 -extensions ext -extfile <(cert_conf "$eku" "$sans") \
    -out "$PKI_DIR/$name.crt" 2>/dev/null
  rm -f "$PKI_DIR/$name.csr"
}
# kubeconfig FILE CERT_NAME
kubeconfig() {
  local file=$1 name=$2
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: paralleljob-local
  cluster:
    server: $APISERVER_URL
    certificate-authority-data: $(base64 -w0 <"$PKI_DIR/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 <"$PKI_DIR/$name.crt")
    client-key-data: $(base64 -w0 <"$PKI_DIR/$name.key")
contexts:
- name: paralleljob-local
  context: {cluster: paralleljob-local, user: $name}
current-context: paralleljob-local
EOF
  chmod 600 "$file"
}

new_key "$PKI_DIR/ca.key"
openssl req -x509 -new -key "$PKI_DIR/ca.key" -subj "/CN=paralleljob-local-ca" -days 3650 \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
  -out "$PKI_DIR/ca.crt" 2>/dev/null
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

kubeconfig "$KUBECONFIG_ADMIN" admin
for c in controller-manager scheduler kube-proxy kubelet coredns kwok; do
  kubeconfig "$CLUSTER_DIR/$c.kubeconfig" "$c"
done

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

# ---------------------------------------------------------------- images

step "building the preloaded images (cached in $CACHE_DIR/images)"
mapfile -t IMAGES < <(python3 "$HACK_DIR/images/build_image.py" --cache-dir "$CACHE_DIR")
PAUSE_IMAGE=$(printf '%s\n' "${IMAGES[@]}" | awk '$1 ~ /\/pause:/ {print $1}')

# ---------------------------------------------------------------- etcd + containerd

step "starting etcd and containerd"
start etcd "$ETCD_BIN" --name local --data-dir "$CLUSTER_DIR/etcd" \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster local=http://127.0.0.1:2380 \
  --quota-backend-bytes 4294967296 --log-level warn

cat >"$CONTAINERD_DIR/config.toml" <<EOF
# Private containerd of the local cluster; nothing here touches a system one.
version = 2
root = "$CONTAINERD_DIR/root"
state = "$CONTAINERD_DIR/state"
# Keep containerd's own oom_score_adj (raising privileges for it needs
# CAP_SYS_RESOURCE, which no process on these machines has).
oom_score = 0
disabled_plugins = ["io.containerd.internal.v1.tracing", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$CONTAINERD_DIR/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Containers ask for negative OOM scores (kubelet's Guaranteed QoS); writing
  # one needs CAP_SYS_RESOURCE, so clamp them to containerd's own score.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  # Pod network namespaces under our state dir, so cleanup finds them all.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # No systemd on these machines: cgroupfs everywhere.
        SystemdCgroup = false
        Root = "$CONTAINERD_DIR/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$CNI_CONF_DIR"
    max_conf_num = 1
EOF

cat >"$CNI_CONF_DIR/10-paralleljob.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "paralleljob-local",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$CLUSTER_DIR/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$BRIDGE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
start containerd "$(command -v containerd)" --config "$CONTAINERD_DIR/config.toml" --log-level warn

wait_for etcd 30 curl -fsS http://127.0.0.1:2379/health
wait_for containerd 30 ctr_ version

step "importing images into the node's containerd"
for line in "${IMAGES[@]}"; do
  read -r ref tarball <<<"$line"
  ctr_ images import "$tarball" >/dev/null
  log "  $ref"
done

# ---------------------------------------------------------------- control plane

step "starting kube-apiserver"
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
  --enable-admission-plugins=NodeRestriction \
  --audit-policy-file="$HACK_DIR/cluster/audit-policy.yaml" \
  --audit-log-path="$LOG_DIR/audit.log" --audit-log-maxsize=200 --audit-log-maxbackup=5 \
  --allow-privileged=true \
  --profiling=false \
  --v=1
wait_for kube-apiserver 60 kubectl get --raw /readyz

step "starting controller-manager, scheduler, CoreDNS, kube-proxy, kubelet, kwok"
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
  --controllers='*' \
  --leader-elect=false \
  --profiling=false \
  --v=1

start kube-scheduler "$KUBE_BIN/kube-scheduler" \
  --kubeconfig="$CLUSTER_DIR/scheduler.kubeconfig" \
  --authentication-kubeconfig="$CLUSTER_DIR/scheduler.kubeconfig" \
  --authorization-kubeconfig="$CLUSTER_DIR/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port=10259 \
  --leader-elect=false \
  --profiling=false \
  --v=1

# CoreDNS runs on the host, bound to the bridge gateway, and is published as
# the usual kube-system/kube-dns Service (ClusterIP $DNS_SERVICE_IP) through a
# hand-made EndpointSlice: pods resolve exactly as with an in-cluster CoreDNS,
# without one more image or a pod that must be scheduled before DNS works.
cat >"$CLUSTER_DIR/Corefile" <<EOF
.:53 {
    bind $BRIDGE_IP
    errors
    health 127.0.0.1:10054
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $CLUSTER_DIR/coredns.kubeconfig paralleljob-local
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    forward . /etc/resolv.conf
    cache 30
    loop
}
EOF
kubectl apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:coredns}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: system:coredns}
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/name: CoreDNS}
spec:
  clusterIP: $DNS_SERVICE_IP
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kube-dns-host
  namespace: kube-system
  labels:
    kubernetes.io/service-name: kube-dns
    endpointslice.kubernetes.io/managed-by: local-cluster.paralleljob.dev
addressType: IPv4
endpoints:
- addresses: ["$BRIDGE_IP"]
  conditions: {ready: true}
ports:
- {name: dns, port: 53, protocol: UDP}
- {name: dns-tcp, port: 53, protocol: TCP}
EOF
start coredns "$COREDNS_BIN" -conf "$CLUSTER_DIR/Corefile"

cat >"$CLUSTER_DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $CLUSTER_DIR/kube-proxy.kubeconfig
hostnameOverride: $REAL_NODE
mode: iptables
clusterCIDR: $CLUSTER_CIDR
bindAddress: $BRIDGE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# NodePorts only on the bridge address, never on the external interface.
nodePortAddresses: ["$BRIDGE_IP/32"]
iptables:
  localhostNodePorts: false
# Leave the host's conntrack sysctls alone (0 = do not set).
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
start kube-proxy "$KUBE_BIN/kube-proxy" --config="$CLUSTER_DIR/kube-proxy.yaml" --v=1

cat >"$CLUSTER_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $BRIDGE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $PKI_DIR/kubelet-serving.crt
tlsPrivateKeyFile: $PKI_DIR/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI_DIR/ca.crt}
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
# No systemd: cgroupfs, under a parent only this cluster uses.
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
cgroupsPerQOS: true
failSwapOn: false
# A negative score (the default -999) needs CAP_SYS_RESOURCE.
oomScoreAdj: 0
# Preloaded images cannot be pulled again: never garbage-collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
clusterDNS: [$DNS_SERVICE_IP]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podLogsDir: $CLUSTER_DIR/pod-logs
serializeImagePulls: false
maxPods: 110
EOF
start kubelet "$KUBE_BIN/kubelet" \
  --config="$CLUSTER_DIR/kubelet.yaml" \
  --kubeconfig="$CLUSTER_DIR/kubelet.kubeconfig" \
  --root-dir="$KUBELET_DIR" \
  --hostname-override="$REAL_NODE" \
  --node-ip="$BRIDGE_IP" \
  --node-labels=paralleljob.dev/node-type=real \
  --v=1

# The kwok node: kwok only manages nodes carrying this annotation, so it
# never touches the real node.
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $KWOK_NODE
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    paralleljob.dev/node-type: kwok
    kubernetes.io/hostname: $KWOK_NODE
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    node-role.kubernetes.io/agent: ""
spec:
  taints:
  - {key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule}
EOF
start kwok "$KWOK_BIN" \
  --kubeconfig="$CLUSTER_DIR/kwok.kubeconfig" \
  --config="$HACK_DIR/cluster/kwok-stages.yaml" \
  --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --node-ip="$KWOK_NODE_IP" \
  --cidr="${KWOK_CIDR%.0/*}.1/${KWOK_CIDR#*/}" \
  --node-lease-duration-seconds=40

wait_for coredns 30 curl -fsS http://127.0.0.1:10054/health
wait_for kube-proxy 30 curl -fsS http://127.0.0.1:10256/healthz
wait_for kubelet 60 curl -fsS http://127.0.0.1:10248/healthz

step "waiting for every node to be Ready"
node_ready() {
  [ "$(kubectl get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
wait_for kubelet 90 node_ready "$REAL_NODE"
wait_for kwok 60 node_ready "$KWOK_NODE"
# Pods need their namespace's default ServiceAccount before they can be created.
wait_for kube-controller-manager 30 kubectl get serviceaccount default -n default

step "ready"
kubectl get nodes -o wide >&2
log "cluster: stop it with 'make cluster-down'; logs in $LOG_DIR"
log "cluster: export KUBECONFIG=$KUBECONFIG_ADMIN"
echo "$KUBECONFIG_ADMIN"
