#!/usr/bin/env bash
# Imports an image tarball (`docker save` / docker-archive, or OCI layout
# tar) into the real node's containerd, where pods can use it with
# imagePullPolicy IfNotPresent or Never. The local cluster cannot pull from
# any registry, and cluster-down removes containerd's store, so load images
# again after each `make cluster`.
# Usage: hack/load-image.sh IMAGE.tar [IMAGE.tar...]
#        docker save IMAGE | hack/load-image.sh -
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_DIR/cluster-env.sh"

[ $# -ge 1 ] || die "usage: $0 IMAGE.tar [IMAGE.tar...]  (or '-' for stdin)"
[ "$(id -u)" -eq 0 ] || die "importing into the cluster's containerd needs root"
pid_alive containerd || die "the local cluster's containerd is not running: run 'make cluster'"

for tarball in "$@"; do
  [ "$tarball" = - ] || [ -f "$tarball" ] || die "no such file: $tarball"
  out=$(ctr_ images import "$tarball" 2>&1) || die "import of $tarball failed: $out"
  # ctr prints "unpacking <ref> (sha256:...)...done" per image.
  refs=$(sed -n 's/^unpacking \([^ ]*\) .*/\1/p' <<<"$out")
  for ref in $refs; do log "loaded $ref"; done
  [ -n "$refs" ] || log "imported $tarball: $out"
done
