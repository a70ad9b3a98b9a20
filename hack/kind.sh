#!/usr/bin/env bash
# A real kind cluster on a machine that reaches no container registry: kind's
# node image is built here, from the pinned Kubernetes binaries and images
# assembled from Debian packages and Go modules, on a docker engine of its own.
#
#   hack/kind.sh image     build (or reuse) the node image; prints its name
#   hack/kind.sh up        image, then `kind create cluster` (skipped when the
#                          cluster exists); prints its kubeconfig path
#   hack/kind.sh smoke     a busybox pod on it: DNS and the kubernetes Service
#   hack/kind.sh down      `kind delete cluster`
#   hack/kind.sh off       down, drop kind's docker network (its bridge), then
#                          stop the docker engine this script started
#   hack/kind.sh env       print the exports that point docker, kind and
#                          kubectl at it and at the cluster
#   hack/kind.sh running   whether kind's docker engine runs (exit status)
#
# One function per piece, each cached under $CACHE_DIR keyed by its inputs:
#   kind_dockerd  a dockerd for kind only ($CACHE_DIR/dockerd-kind/): its own
#                 data root, exec root, socket and PID file; a bridge network
#                 for kind's nodes, but no iptables rules, no ip_forward or
#                 FORWARD policy change, no docker0 (the local cluster's pod
#                 traffic relies on FORWARD ACCEPT); and hack/kind/runc-wrapper
#                 as its default runtime, so `docker run --privileged` works
#                 without CAP_SYS_RESOURCE in the bounding set
#   base_image    kindest/base's equivalent: debootstrap bookworm + systemd +
#                 Debian's containerd, runc, CNI plugins + crictl + kind's
#                 entrypoint and files from the sigs.k8s.io/kind module
#   component_images  what kubeadm runs and kind preloads, as docker archives
#                 (hack/kind/node_images.py)
#   release_tarball   a Kubernetes release tarball of those (kind's --type file)
#   node_image    `kind build node-image --type file ... --base-image ...`
# Configs live in hack/kind/. Logs go to stderr; stdout has the result only.
#
# What differs from kind's own images, and why (each file says more):
# - kindnetd, kind's default CNI, cannot be built: its module
#   (sigs.k8s.io/kind/images/kindnetd) is not served by the Go module proxy.
#   The node image holds a placeholder under its name (kind's build requires
#   that image, and would try to pull it) that exits 1 saying so, and clusters
#   are created with disableDefaultCNI and a static ptp + host-local + portmap
#   CNI config (hack/kind/cluster.yaml, cni.conflist): one node only.
# - local-path-provisioner is v0.0.30 (the proxy's), under the name of kind's
#   image of v0.0.34.
# - containerd, runc and the CNI plugins are Debian bookworm's (containerd 1.6,
#   kind's are 2.x): hack/kind/containerd.toml; hack/kind/ctr-shim gives kind's
#   build the two ctr commands 1.6 lacks.
# - cgroup v1 and no CAP_SYS_RESOURCE: the kubelet gets failCgroupV1: false and
#   oomScoreAdj: 0, containerd restrict_oom_score_adj (hack/kind/cluster.yaml).
#
# Use it with `eval "$(hack/kind.sh env)"`: DOCKER_HOST (kind's engine), PATH
# (Debian's docker client, the pinned kind and kubectl), KUBECONFIG.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KIND_DOCKERD_DIR=${PJ_KIND_DOCKERD_DIR:-$CACHE_DIR/dockerd-kind}
KIND_DOCKER_SOCK=$KIND_DOCKERD_DIR/docker.sock
KIND_DOCKER_HOST=unix://$KIND_DOCKER_SOCK
KIND_DOCKERD_PIDFILE=$KIND_DOCKERD_DIR/dockerd.pid
# The network kind's nodes get (docker's default pool for new networks): clear
# of the local cluster's 10.244/16 pods, 10.96/16 services and 10.245/16 kwok.
KIND_ADDRESS_POOL=${PJ_KIND_ADDRESS_POOL:-172.30.0.0/16}
KIND_CLUSTER_NAME=${KIND_CLUSTER_NAME:-paralleljob}
# The engine, and so the cluster, is the machine's, not a checkout's.
KIND_KUBECONFIG=${PJ_KIND_KUBECONFIG:-$KIND_DOCKERD_DIR/$KIND_CLUSTER_NAME.kubeconfig}
KIND_MODULE_DIR=
# kind calls `docker`: Debian's client, which matches Debian's dockerd (another
# client may come first on PATH). kind itself and kubectl: the pinned builds.
KIND_TOOLS=$KIND_DOCKERD_DIR/bin
DOCKER_CLI=${PJ_DOCKER_CLI:-/usr/bin/docker}
KUBE_BIN=$CACHE_DIR/kubernetes-$KUBERNETES_VERSION/bin
# What kubeadm $KUBERNETES_VERSION asks for (`kubeadm config images list`):
# the containerd sandbox image must be that one, preloaded.
PAUSE_IMAGE=registry.k8s.io/pause:3.10.2
SUITE=bookworm
# kind's images/base/Dockerfile package list, less nfs-common and open-iscsi
# (networked storage; not needed here) and fuse-overlayfs (rootless only);
# plus Debian's container runtime in place of kind's own builds.
BASE_PACKAGES=systemd,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,e2fsprogs,bash,ca-certificates,curl,jq,procps,containerd,runc,containernetworking-plugins

docker_() { DOCKER_HOST=$KIND_DOCKER_HOST "$DOCKER_CLI" "$@"; }
answers() { DOCKER_HOST=$KIND_DOCKER_HOST timeout 10 "$DOCKER_CLI" version --format '{{.Server.Version}}' >/dev/null 2>&1; }

# Runs kind with our engine, Debian's docker client and the pinned binaries.
kind_() {
  PATH=$KIND_TOOLS:$KUBE_BIN:$PATH DOCKER_HOST=$KIND_DOCKER_HOST "$KIND_TOOLS/kind" "$@"
}

kind_module_dir() {
  [ -n "$KIND_MODULE_DIR" ] || KIND_MODULE_DIR=$(go_module_file "sigs.k8s.io/kind@$KIND_VERSION" Dir)
  echo "$KIND_MODULE_DIR"
}

# --- the docker engine -----------------------------------------------------

dockerd_pid() {
  local pid
  pid=$(cat "$KIND_DOCKERD_PIDFILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  [ "$(basename "$(readlink "/proc/$pid/exe" 2>/dev/null)")" = dockerd ] || return 1
  echo "$pid"
}

kind_dockerd() {
  mkdir -p "$KIND_TOOLS"
  ln -sfn "$DOCKER_CLI" "$KIND_TOOLS/docker"
  ln -sfn "$CACHE_DIR/kind-$KIND_VERSION/bin/kind" "$KIND_TOOLS/kind"
  if dockerd_pid >/dev/null && answers; then return; fi
  local pid
  if pid=$(dockerd_pid); then die "dockerd $pid (from $KIND_DOCKERD_PIDFILE) runs but does not answer on $KIND_DOCKER_SOCK"; fi
  require_cmd dockerd "run 'make prereqs' (hack/install-prereqs.sh)"
  # The wrapper runs from the cache, not from this checkout, which may move.
  install -m 0755 "$HACK_DIR/kind/runc-wrapper" "$KIND_DOCKERD_DIR/runc-wrapper"
  rm -f "$KIND_DOCKERD_PIDFILE" "$KIND_DOCKER_SOCK"
  log "kind dockerd: starting (log $KIND_DOCKERD_DIR/dockerd.log)"
  setsid dockerd \
    --host "$KIND_DOCKER_HOST" \
    --pidfile "$KIND_DOCKERD_PIDFILE" \
    --data-root "$KIND_DOCKERD_DIR/data" \
    --exec-root "$KIND_DOCKERD_DIR/exec" \
    --storage-driver overlay2 \
    --exec-opt native.cgroupdriver=cgroupfs \
    --cgroup-parent /dockerd-kind \
    --add-runtime "kind-runc=$KIND_DOCKERD_DIR/runc-wrapper" \
    --default-runtime kind-runc \
    --bridge none \
    --default-address-pool "base=$KIND_ADDRESS_POOL,size=24" \
    --iptables=false --ip6tables=false --ip-masq=false --ip-forward=false \
    >"$KIND_DOCKERD_DIR/dockerd.log" 2>&1 </dev/null &
  local deadline=$((SECONDS + 60))
  until answers; do
    if ! kill -0 $! 2>/dev/null; then tail -n 20 "$KIND_DOCKERD_DIR/dockerd.log" >&2; die "kind dockerd exited"; fi
    [ $SECONDS -lt $deadline ] || die "kind dockerd did not answer within 60s; see $KIND_DOCKERD_DIR/dockerd.log"
    sleep 0.5
  done
  log "kind dockerd: $(cat "$KIND_DOCKERD_PIDFILE") ready on $KIND_DOCKER_HOST"
}

dockerd_stop() {
  local pid
  if ! pid=$(dockerd_pid); then log "kind dockerd: not running"; return; fi
  log "kind dockerd: stopping $pid"
  terminate "$pid" "kind dockerd"
  rm -f "$KIND_DOCKERD_PIDFILE"
  # Its --cgroup-parent, once empty (rmdir refuses a cgroup in use).
  rmdir /sys/fs/cgroup/*/dockerd-kind 2>/dev/null || true
}

# --- the base image ---------------------------------------------------------

# key WORDS...: a short hash of strings and of the files among them: the
# checkout's by content; the cache's (hundreds of MB of binaries, each written
# once and moved into place) by name, size, mtime and inode, which is instant.
key() {
  local arg
  for arg in "$@"; do
    if [ -f "$arg" ] && [[ $arg == "$CACHE_DIR"/* ]]; then
      stat -c '%n %s %Y %i' "$arg"
    elif [ -f "$arg" ]; then
      sha256sum <"$arg"
    else
      echo "$arg"
    fi
  done | sha256sum | cut -c1-12
}

# debootstrap's output alone (the slow part), keyed by suite, mirror, packages.
debootstrap_tarball() {
  local out
  out=$CACHE_DIR/kind-base/debootstrap-$SUITE-$(key "$SUITE" "$BASE_PACKAGES").tar
  if [ ! -s "$out" ]; then
    require_cmd debootstrap "run 'make prereqs' (hack/install-prereqs.sh)"
    local work start=$SECONDS
    mkdir -p "$CACHE_DIR/kind-base"
    work=$(mktemp -d "$CACHE_DIR/kind-base/build.XXXXXX")
    local mirror
    mirror=$(debian_mirror "$SUITE")
    log "kind base: debootstrap $SUITE (minbase + $BASE_PACKAGES) from $mirror"
    if ! debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$work/rootfs" "$mirror" >"$work/log" 2>&1; then
      tail -n 30 "$work/log" >&2
      cleanup_rootfs "$work"
      die "debootstrap failed"
    fi
    tar --numeric-owner --xattrs -C "$work/rootfs" -cf "$out.tmp" .
    mv "$out.tmp" "$out"
    cleanup_rootfs "$work"
    find "$CACHE_DIR/kind-base" -maxdepth 1 -name "debootstrap-$SUITE-*.tar" ! -name "$(basename "$out")" -delete
    log "kind base: debootstrap done in $((SECONDS - start))s"
  fi
  echo "$out"
}

cleanup_rootfs() {
  # debootstrap mounts proc/sys in the target; never delete across a mount.
  grep -o " $1/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf --one-file-system "$1"
}

# Lays kind's images/base over a debootstrap root ($1), as its Dockerfile does.
customize_base() {
  local r=$1 files
  files=$(kind_module_dir)/images/base/files
  # COPY --chmod=0755 files/usr/local/bin/*, files/kind/bin/; 0644 the rest.
  install -D -m 0755 -t "$r/usr/local/bin" "$files"/usr/local/bin/*
  install -D -m 0644 -t "$r/kind" "$files"/kind/README.txt
  install -D -m 0755 -t "$r/kind/bin" "$files"/kind/bin/*
  install -D -m 0644 -t "$r/LICENSES" "$files"/LICENSES/*
  install -D -m 0644 -t "$r/etc" "$files"/etc/crictl.yaml
  install -D -m 0644 -t "$r/etc/default" "$files"/etc/default/*
  install -D -m 0644 -t "$r/etc/sysctl.d" "$files"/etc/sysctl.d/*
  install -D -m 0644 -t "$r/etc/systemd/system" "$files"/etc/systemd/system/*.service "$files"/etc/systemd/system/*.slice
  install -D -m 0644 -t "$r/etc/systemd/system/kubelet.service.d" "$files"/etc/systemd/system/kubelet.service.d/*
  # Debian's containerd is /usr/bin/containerd, kind's /usr/local/bin.
  sed -i 's#^ExecStart=/usr/local/bin/containerd#ExecStart=/usr/bin/containerd#' "$r/etc/systemd/system/containerd.service"
  rm -f "$r/etc/systemd/system/containerd-fuse-overlayfs.service"
  render "$HACK_DIR/kind/containerd.toml" PAUSE_IMAGE >"$r/etc/containerd/config.toml"
  # Debian's CNI plugins live in /usr/lib/cni; kind's (and containerd's
  # default bin_dir) in /opt/cni/bin.
  mkdir -p "$r/opt/cni/bin"
  local plugin
  for plugin in "$r"/usr/lib/cni/*; do ln -sfn "/usr/lib/cni/$(basename "$plugin")" "$r/opt/cni/bin/"; done
  install -m 0755 "$CACHE_DIR/cri-tools-$CRI_TOOLS_VERSION/bin/crictl" "$r/usr/local/bin/crictl"
  # What kind's build asks of containerd 2.x's ctr, on 1.6's (see the file).
  install -m 0755 "$HACK_DIR/kind/ctr-shim" "$r/usr/local/bin/ctr"
  # The Dockerfile's RUN steps: systemd trimmed for a container, services on.
  find "$r/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "$r"/lib/systemd/system/multi-user.target.wants/* "$r"/etc/systemd/system/*.wants/* \
    "$r"/lib/systemd/system/local-fs.target.wants/* "$r"/lib/systemd/system/sockets.target.wants/*udev* \
    "$r"/lib/systemd/system/sockets.target.wants/*initctl* "$r"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >>"$r/etc/systemd/journald.conf"
  ln -sfn /usr/lib/systemd/systemd "$r/sbin/init"
  chroot "$r" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
  chroot "$r" systemctl mask systemd-binfmt.service >/dev/null 2>&1
  mkdir -p "$r/etc/kubernetes/manifests"
  # cri-base.json: containerd's default spec, plus kind's product-files hook,
  # without rlimits.
  chroot "$r" ctr oci spec \
    | chroot "$r" jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
    | chroot "$r" jq 'del(.process.rlimits)' >"$r/etc/containerd/cri-base.json"
  # clean-install's cleanup.
  rm -rf "$r"/var/cache/debconf/* "$r"/var/lib/apt/lists/* "$r"/var/log/* "$r"/tmp/* "$r"/var/tmp/* \
    "$r"/usr/share/doc/* "$r"/usr/share/doc-base/* "$r"/usr/share/man/* "$r"/var/cache/apt/*.bin \
    "$r"/var/cache/apt/archives/*.deb
  : >"$r/etc/machine-id"
}

# Prints the base image's name, building and importing it when missing.
base_image() {
  local deboot image
  deboot=$(debootstrap_tarball)
  image=paralleljob-kind-base:$(key "$deboot" "$(declare -f customize_base)" "$HACK_DIR/kind/containerd.toml" \
    "$HACK_DIR/kind/ctr-shim" \
    "$KIND_VERSION" "$CRI_TOOLS_VERSION" "$PAUSE_IMAGE")
  if docker_ image inspect "$image" >/dev/null 2>&1; then
    log "kind base: $image present"
    echo "$image"
    return
  fi
  local work start=$SECONDS
  work=$(mktemp -d "$CACHE_DIR/kind-base/build.XXXXXX")
  mkdir "$work/rootfs"
  tar --numeric-owner --xattrs -C "$work/rootfs" -xf "$deboot"
  customize_base "$work/rootfs" || { cleanup_rootfs "$work"; die "kind base: customizing the root failed"; }
  log "kind base: importing as $image"
  tar --numeric-owner --xattrs -C "$work/rootfs" -cf - . | docker_ import - "$image.rootfs" >/dev/null
  cleanup_rootfs "$work"
  # What `docker import --change` cannot set (STOPSIGNAL) comes from a build
  # FROM the imported root, as kind's final stage sets it.
  printf '%s\n' "FROM $image.rootfs" "ENV container=docker" \
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    "STOPSIGNAL SIGRTMIN+3" 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
    | DOCKER_BUILDKIT=0 docker_ build -q -t "$image" - >/dev/null
  docker_ rmi "$image.rootfs" >/dev/null
  # Base images of earlier inputs are no use any more (a node image built on
  # one keeps its layers).
  docker_ images --format '{{.Repository}}:{{.Tag}}' paralleljob-kind-base | grep -vx "$image" \
    | xargs -r "$DOCKER_CLI" -H "$KIND_DOCKER_HOST" rmi >/dev/null 2>&1 || true
  log "kind base: $image built in $((SECONDS - start))s"
  echo "$image"
}

# --- the node image -----------------------------------------------------------

# kubeadm's image list must match what node_images.py builds: a drift (a
# Kubernetes pin change) would otherwise show up as a failed pull in kind.
check_kubeadm_images() {
  local want
  want=$("$CACHE_DIR/kubeadm-$KUBERNETES_VERSION/bin/kubeadm" config images list --kubernetes-version "$KUBERNETES_VERSION" 2>/dev/null) \
    || die "kubeadm config images list failed"
  local etcd=registry.k8s.io/etcd:${KIND_ETCD_VERSION#v}-0 coredns=registry.k8s.io/coredns/coredns:$KIND_COREDNS_VERSION
  grep -qx "$etcd" <<<"$want" || die "kubeadm $KUBERNETES_VERSION wants $(grep etcd <<<"$want"), not $etcd: update KIND_ETCD_VERSION"
  grep -qx "$coredns" <<<"$want" || die "kubeadm $KUBERNETES_VERSION wants $(grep coredns <<<"$want"), not $coredns: update KIND_COREDNS_VERSION"
  grep -qx "$PAUSE_IMAGE" <<<"$want" || die "kubeadm $KUBERNETES_VERSION wants $(grep pause <<<"$want"), not $PAUSE_IMAGE: update PAUSE_IMAGE"
}

# The release tarball kind's --type file reads, keyed by every input.
release_tarball() {
  local inputs=(
    "$HACK_DIR/kind/node_images.py" "$HACK_DIR/images/build_image.py" "$HACK_DIR/versions.env"
    "$CACHE_DIR/kubeadm-$KUBERNETES_VERSION/bin/kubeadm"
    "$CACHE_DIR/etcd-$KIND_ETCD_VERSION/bin/etcd" "$CACHE_DIR/coredns-$KIND_COREDNS_VERSION/bin/coredns"
    "$CACHE_DIR/local-path-provisioner-$LOCAL_PATH_PROVISIONER_VERSION/bin/local-path-provisioner"
  )
  local bin
  for bin in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl; do
    inputs+=("$CACHE_DIR/kubernetes-$KUBERNETES_VERSION/bin/$bin")
  done
  # The Debian packages node_images.py copies files of.
  inputs+=("$(dpkg-query -W -f='${Package}=${Version} ' iptables conntrack busybox-static bash coreutils)")
  local out
  out=$CACHE_DIR/kind-node/kubernetes-$KUBERNETES_VERSION-$(key "${inputs[@]}").tar.gz
  if [ ! -s "$out" ]; then
    check_kubeadm_images
    local start=$SECONDS
    log "kind node: writing the release tarball $out"
    python3 "$HACK_DIR/kind/node_images.py" --cache-dir "$CACHE_DIR" --out "$out" >/dev/null
    log "kind node: release tarball ($(du -h "$out" | cut -f1)) in $((SECONDS - start))s"
    # Tarballs of earlier inputs are no use any more (~230 MB each).
    find "$CACHE_DIR/kind-node" -maxdepth 1 -name 'kubernetes-*.tar.gz' ! -name "$(basename "$out")" -delete
  fi
  echo "$out"
}

# Prints the node image's name, building it when missing.
node_image() {
  "$HACK_DIR/build.sh" kubernetes kind kind-node >&2
  kind_dockerd
  local base tarball image
  base=$(base_image)
  tarball=$(release_tarball)
  image=paralleljob-kind-node:$KUBERNETES_VERSION-$(key "$base" "$tarball" "$KIND_VERSION")
  if docker_ image inspect "$image" >/dev/null 2>&1; then
    log "kind node: $image present"
    echo "$image"
    return
  fi
  local start=$SECONDS logfile=$KIND_DOCKERD_DIR/build-node-image.log
  log "kind node: kind build node-image (log $logfile)"
  if ! kind_ build node-image --type file "$tarball" --base-image "$base" --image "$image" >"$logfile" 2>&1; then
    tail -n 30 "$logfile" >&2
    die "kind build node-image failed"
  fi
  log "kind node: $image built in $((SECONDS - start))s"
  # Node images of earlier inputs are no use any more.
  docker_ images --format '{{.Repository}}:{{.Tag}}' paralleljob-kind-node | grep -vx "$image" \
    | xargs -r "$DOCKER_CLI" -H "$KIND_DOCKER_HOST" rmi >/dev/null 2>&1 || true
  echo "$image"
}

# --- the cluster ------------------------------------------------------------------

cluster_exists() { kind_ get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER_NAME"; }

# shellcheck disable=SC2034 # CNI_CONFLIST and the subnets: read by render
up() {
  local image
  image=${KIND_NODE_IMAGE:-$(node_image)}
  if cluster_exists; then
    log "kind: cluster $KIND_CLUSTER_NAME exists"
  else
    local config=$KIND_DOCKERD_DIR/$KIND_CLUSTER_NAME.yaml start=$SECONDS
    local CNI_CONFLIST POD_SUBNET SERVICE_SUBNET NODE_POD_CIDR
    CNI_CONFLIST=$KIND_DOCKERD_DIR/$KIND_CLUSTER_NAME-cni.conflist
    POD_SUBNET=${PJ_KIND_POD_SUBNET:-10.246.0.0/16}
    SERVICE_SUBNET=${PJ_KIND_SERVICE_SUBNET:-10.97.0.0/16}
    # The single node's pod range: the first /24 the controller-manager hands out.
    NODE_POD_CIDR=${POD_SUBNET%.*/*}.0/24
    render "$HACK_DIR/kind/cni.conflist" NODE_POD_CIDR >"$CNI_CONFLIST"
    render "$HACK_DIR/kind/cluster.yaml" CNI_CONFLIST POD_SUBNET SERVICE_SUBNET >"$config"
    log "kind: creating cluster $KIND_CLUSTER_NAME from $image"
    kind_ create cluster --name "$KIND_CLUSTER_NAME" --image "$image" --config "$config" \
      --kubeconfig "$KIND_KUBECONFIG" >&2
    log "kind: cluster $KIND_CLUSTER_NAME created in $((SECONDS - start))s"
    # The CNI step kind leaves to kindnetd: once kube-proxy runs (it needs no
    # pod network), the node gets its CNI config, turns Ready, and the first
    # pods (CoreDNS, local-path-provisioner) start with Service rules in place.
    local kubectl=("$KUBE_BIN/kubectl" --kubeconfig "$KIND_KUBECONFIG" -n kube-system)
    "${kubectl[@]}" rollout status daemonset/kube-proxy --timeout=180s >/dev/null
    docker_ exec "$KIND_CLUSTER_NAME-control-plane" cp /kind/cni/10-kind-ptp.conflist /etc/cni/net.d/
    "${kubectl[@]}" wait node --all --for=condition=Ready --timeout=180s >/dev/null
    "${kubectl[@]}" rollout status deployment/coredns --timeout=180s >/dev/null
    log "kind: node Ready, kube-proxy and CoreDNS running after $((SECONDS - start))s"
    preload_images
  fi
  # Written aside and renamed: a kubectl reading it meanwhile (another script or test
  # on the same cluster: hack/deploy.sh kind and hack/node-image.sh kind run this too)
  # never meets an empty file.
  kind_ get kubeconfig --name "$KIND_CLUSTER_NAME" >"$KIND_KUBECONFIG.$$"
  mv -f "$KIND_KUBECONFIG.$$" "$KIND_KUBECONFIG"
  echo "$KIND_KUBECONFIG"
}

# The images the project's examples and tests run besides its own (busybox,
# redis), as the local cluster's node has them: built by
# hack/images/build_image.py (no registry) and put on the node with `kind load`.
preload_images() {
  local ref tarball refs=()
  while read -r ref tarball; do
    docker_ image inspect "$ref" >/dev/null 2>&1 || docker_ load -i "$tarball" >/dev/null
    refs+=("$ref")
  done < <(python3 "$HACK_DIR/images/build_image.py" --cache-dir "$CACHE_DIR" busybox redis)
  kind_ load docker-image "${refs[@]}" --name "$KIND_CLUSTER_NAME" >&2
}

down() {
  if dockerd_pid >/dev/null && answers && cluster_exists; then
    kind_ delete cluster --name "$KIND_CLUSTER_NAME" --kubeconfig "$KIND_KUBECONFIG" >&2
  else
    log "kind: no cluster $KIND_CLUSTER_NAME"
  fi
  rm -f "$KIND_KUBECONFIG"
}

# A pod on the cluster: the busybox image the project's tests use (built by
# hack/images/build_image.py, no registry), loaded with `kind load`; it must
# resolve and reach the kubernetes Service, and exit 0.
smoke() {
  cluster_exists || die "no kind cluster $KIND_CLUSTER_NAME: run hack/kind.sh up"
  local ref tarball start=$SECONDS
  read -r ref tarball < <(python3 "$HACK_DIR/images/build_image.py" --cache-dir "$CACHE_DIR" busybox)
  docker_ image inspect "$ref" >/dev/null 2>&1 || docker_ load -i "$tarball" >/dev/null
  kind_ load docker-image "$ref" --name "$KIND_CLUSTER_NAME" >&2
  local kubectl=("$KUBE_BIN/kubectl" --kubeconfig "$KIND_KUBECONFIG")
  "${kubectl[@]}" delete pod kind-smoke --ignore-not-found --wait=true >/dev/null
  "${kubectl[@]}" run kind-smoke --image="$ref" --image-pull-policy=Never --restart=Never -- \
    sh -c 'nslookup kubernetes.default.svc.cluster.local && echo | nc -w 5 kubernetes.default.svc 443 && echo smoke-ok' >/dev/null
  if ! "${kubectl[@]}" wait --for=jsonpath='{.status.phase}'=Succeeded pod/kind-smoke --timeout=120s >/dev/null; then
    "${kubectl[@]}" describe pod kind-smoke >&2 || true
    "${kubectl[@]}" logs kind-smoke >&2 || true
    die "kind smoke: the pod did not succeed"
  fi
  "${kubectl[@]}" logs kind-smoke | grep -qx smoke-ok || die "kind smoke: unexpected output: $("${kubectl[@]}" logs kind-smoke)"
  "${kubectl[@]}" delete pod kind-smoke --wait=false >/dev/null
  log "kind smoke: a pod resolved and reached the kubernetes Service, in $((SECONDS - start))s"
}

# --- main ----------------------------------------------------------------------
case ${1:-} in
  image) node_image ;;
  up) up ;;
  smoke) kind_dockerd; smoke ;;
  down) down ;;
  off)
    down
    # The network's bridge would outlive the engine; kind makes it again.
    if dockerd_pid >/dev/null && answers && [ -z "$(docker_ ps -aq --filter network=kind)" ]; then
      docker_ network rm kind >/dev/null 2>&1 || true
    fi
    dockerd_stop ;;
  running) dockerd_pid >/dev/null && answers ;;
  env)
    kind_dockerd
    echo "export DOCKER_HOST=$KIND_DOCKER_HOST"
    echo "export PATH=$KIND_TOOLS:$KUBE_BIN:\$PATH"
    echo "export KIND_CLUSTER_NAME=$KIND_CLUSTER_NAME"
    echo "export KUBECONFIG=$KIND_KUBECONFIG" ;;
  *) die "usage: $0 image|up|smoke|down|off|env|running" ;;
esac
