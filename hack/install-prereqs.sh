#!/usr/bin/env bash
# Installs the Debian packages the local cluster needs, and only those that
# are missing, so that a second run is a no-op that touches nothing.
# Usage: hack/install-prereqs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# package -> why the cluster needs it
# shellcheck disable=SC2034 # read by apt_install_missing through a nameref
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
  [shellcheck]="lints the hack/ scripts (make lint)"
)
apt_install_missing prereqs PACKAGES
