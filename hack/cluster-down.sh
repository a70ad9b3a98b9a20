#!/usr/bin/env bash
# Stops the local cluster and removes everything it created on the host:
# processes (by the pid files in .cluster/pids only, never by name), mounts
# under .cluster/, the pod bridge, the iptables chains of kubelet, kube-proxy
# and cluster-up, the pod cgroups, and .cluster/ itself except its logs.
# Idempotent; also cleans up after a half-started or crashed cluster.
# Usage: hack/cluster-down.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_DIR/cluster-env.sh"

[ "$(id -u)" -eq 0 ] || die "stopping the local cluster needs root"

if [ ! -d "$CLUSTER_DIR" ] && ! ip link show "$BRIDGE" >/dev/null 2>&1; then
  log "cluster: nothing to stop"
  exit 0
fi

# Node agents and controllers first, so nothing restarts a container or
# recreates a pod while the node is taken apart; then the apiserver.
stop kwok kubelet kube-proxy coredns kube-scheduler kube-controller-manager
stop kube-apiserver

# Containers: ask our containerd to kill them, which also ends their shims.
if pid_alive containerd; then
  for task in $(ctr_ tasks ls -q 2>/dev/null); do
    ctr_ tasks kill --all --signal SIGKILL "$task" >/dev/null 2>&1 || true
    ctr_ tasks delete --force "$task" >/dev/null 2>&1 || true
  done
fi
stop containerd etcd

# Leftovers if containerd had crashed: shims started by *our* containerd
# (identified by our socket in their arguments, never by process name) and
# any process still in the cluster's own pod cgroups.
for proc in /proc/[0-9]*; do
  cmdline=$(tr '\0' ' ' <"$proc/cmdline" 2>/dev/null) || continue
  case $cmdline in
    *"-address $CONTAINERD_SOCK "*) log "cluster: killing leftover shim ${proc#/proc/}"; kill -KILL "${proc#/proc/}" 2>/dev/null || true ;;
  esac
done
cgroup_dirs() { find /sys/fs/cgroup/*/"$CGROUP_ROOT" -depth -type d 2>/dev/null || true; }
for dir in $(cgroup_dirs); do
  [ -f "$dir/cgroup.procs" ] || continue
  while read -r pid; do
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  done <"$dir/cgroup.procs"
done

# Mounts: overlay rootfs, pod network namespaces, kubelet volumes and its
# own rshared bind mount; deepest first, repeated because propagation can
# leave copies behind.
cluster_mounts() { awk -v d="$CLUSTER_DIR" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r -u; }
for _ in 1 2 3 4 5; do
  mounts=$(cluster_mounts)
  [ -z "$mounts" ] && break
  while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done <<<"$mounts"
done
if [ -n "$(cluster_mounts)" ]; then
  cluster_mounts >&2
  die "mounts under $CLUSTER_DIR remain (listed above); not deleting anything below it"
fi

# Pod cgroups (now empty), deepest first.
for dir in $(cgroup_dirs); do rmdir "$dir" 2>/dev/null || true; done

# iptables: kube-proxy removes its own rules; kubelet's canary/hint chains
# and anything else named KUBE-* go with it (no other Kubernetes runs here).
if [ -x "$KUBE_BIN/kube-proxy" ]; then
  "$KUBE_BIN/kube-proxy" --cleanup >>"$LOG_DIR/kube-proxy-cleanup.log" 2>&1 || true
fi
doomed='^(KUBE-|'"$IPT_FORWARD_CHAIN"'$|'"$IPT_MASQ_CHAIN"'$|'"$IPT_TEST_CHAIN"'$)'
remove_chains() {
  local ipt=$1 table rules chain
  for table in filter nat mangle raw; do
    rules=$("$ipt" -w -t "$table" -S 2>/dev/null) || continue
    # Rules in any chain that jump to a doomed chain, then the chains.
    while read -r rule; do
      [ -n "$rule" ] && eval "$ipt -w -t $table -D ${rule#-A }" 2>/dev/null || true
    done < <(grep -E -- "^-A .* -j (KUBE-[A-Za-z0-9-]*|$IPT_FORWARD_CHAIN|$IPT_MASQ_CHAIN|$IPT_TEST_CHAIN)( |\$)" <<<"$rules" || true)
    chains=$(awk '$1 == "-N" {print $2}' <<<"$rules" | grep -E "$doomed" || true)
    for chain in $chains; do "$ipt" -w -t "$table" -F "$chain" 2>/dev/null || true; done
    for chain in $chains; do "$ipt" -w -t "$table" -X "$chain" 2>/dev/null || true; done
  done
}
remove_chains iptables
remove_chains ip6tables

# Network: the bridge (its veths died with the pod netns; the Service range's
# route goes with it) and the route that kept kwok's made-up pod IPs local.
ip link del "$BRIDGE" 2>/dev/null || true
ip route del unreachable "$KWOK_CIDR" 2>/dev/null || true

# kubelet links every container log from /var/log/containers; drop ours.
for link in /var/log/containers/*.log; do
  [ -L "$link" ] || continue
  case $(readlink "$link") in "$CLUSTER_DIR"/*) rm -f "$link" ;; esac
done

# State, except logs (kept for post-mortems; cluster-up rotates them).
# --one-file-system: never follow into anything still mounted.
find "$CLUSTER_DIR" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf --one-file-system {} + 2>/dev/null || true
log "cluster: stopped and cleaned up (logs kept in $LOG_DIR)"
