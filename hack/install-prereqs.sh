#!/usr/bin/env bash
# Installs the Debian packages the local cluster needs, and only those that
# are missing, so that a second run is a no-op that touches nothing.
# Usage: hack/install-prereqs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# package -> why the cluster needs it
declare -A PACKAGES=(
  [containerd]="container runtime of the real node (a project-private instance)"
  [runc]="OCI runtime containerd starts containers with"
  [containernetworking-plugins]="CNI bridge/host-local/portmap/loopback plugins"
  [iptables]="kube-proxy Service rules, CNI masquerade"
  [conntrack]="kube-proxy clears stale UDP conntrack entries"
  [iproute2]="creating and removing the cluster bridge"
  [util-linux]="nsenter/mount/umount for pod network namespaces and cleanup"
  [busybox-static]="content of the preloaded busybox:1.35.0 image"
  [redis-server]="content of the preloaded redis:7.0.15 image"
  [gcc]="compiles the static pause binary of the pause image"
  [libc6-dev]="static libc for the pause binary"
  [openssl]="cluster CA and component certificates"
  [curl]="fetching Go module metadata, health probes"
  [ca-certificates]="TLS to the Go module proxy"
  [procps]="process inspection during cleanup"
)

missing=()
for pkg in "${!PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done

if [ ${#missing[@]} -eq 0 ]; then
  log "prereqs: all Debian packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  {
    echo "error: missing Debian packages, and installing them needs root:"
    for pkg in "${missing[@]}"; do printf '  %-28s %s\n' "$pkg" "${PACKAGES[$pkg]}"; done
    echo "run as root: apt-get install -y ${missing[*]}"
  } >&2
  exit 1
fi
require_cmd apt-get "this script supports Debian/Ubuntu only; install: ${missing[*]}"

log "prereqs: installing ${missing[*]}"
# Package maintainer scripts would start the system containerd and a system
# redis-server. The cluster runs its own private containerd and redis only
# runs inside pods, so forbid service starts during this install (the
# standard policy-rc.d mechanism), unless the machine already has a policy.
created_policy=
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  created_policy=1
fi
cleanup() { [ -z "$created_policy" ] || rm -f /usr/sbin/policy-rc.d; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
# Another apt run (e.g. a colleague installing docker) may hold the dpkg lock:
# wait for it rather than fail.
# Refresh package lists only when they are absent or an install fails on
# stale lists: apt-get update is the slow, network-bound part.
if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then
  apt-get update -qq -o DPkg::Lock::Timeout=600
fi
if ! apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}" >/dev/null; then
  log "prereqs: install failed, refreshing package lists and retrying"
  apt-get update -qq -o DPkg::Lock::Timeout=600
  apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}" >/dev/null
fi
log "prereqs: installed ${missing[*]}"
