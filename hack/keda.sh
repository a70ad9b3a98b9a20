#!/usr/bin/env bash
# KEDA (make keda, make keda-down), pinned by KEDA_VERSION in versions.env.
#
#   hack/keda.sh up [local|kind]    install KEDA and wait until its metrics
#                                   APIService is Available
#   hack/keda.sh down [local|kind]  remove it
#
# Both install the manifests of the pinned Go module's config/minimal (KEDA's
# install without admission webhooks) through hack/keda/kustomization.yaml,
# fetched with the machine's Go configuration (GOPROXY). local (the default
# when .cluster/kubeconfig exists): no registry is reachable, so the images
# come from the module too: the binaries (hack/build.sh keda) on an empty
# root, named as KEDA's own (ghcr.io/kedacore/keda and keda-metrics-apiserver,
# tag without the "v"), kept as tarballs in $CACHE_DIR and imported into the
# node. kind: the node pulls those images from KEDA's registry.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_DIR/kube-target.sh"

action='' mode=''
up_down_args "$@"  # sets both

TAG=${KEDA_VERSION#v}
IMAGES=(keda keda-metrics-apiserver)
STORE=$CACHE_DIR/images/keda-$KEDA_VERSION
start=$SECONDS

module_dir() { go_module_file "github.com/kedacore/keda/v2@$KEDA_VERSION" Dir; }

# binary_of IMAGE: the binary hack/build.sh builds for it.
binary_of() { case $1 in keda) echo keda ;; keda-metrics-apiserver) echo keda-adapter ;; esac; }

# Builds the image tarballs once per version (docker on Debian's engine).
build_images() {
  local build=0 image
  for image in "${IMAGES[@]}"; do [ -s "$STORE/$image.tar" ] || build=1; done
  [ $build = 1 ] || { log "keda: images cached in $STORE"; return; }
  "$HACK_DIR/build.sh" keda
  DOCKER_HOST=$("$HACK_DIR/dockerd.sh" env | sed -n 's/^export DOCKER_HOST=//p')
  [ -n "$DOCKER_HOST" ] || die "no docker engine"
  export DOCKER_HOST
  local context
  context=$(mktemp -d)
  mkdir -p "$context/rootfs/tmp" "$context/rootfs/etc/ssl/certs" "$STORE"
  chmod 1777 "$context/rootfs/tmp"
  cp /etc/ssl/certs/ca-certificates.crt "$context/rootfs/etc/ssl/certs/"
  cp "$HACK_DIR/keda/Dockerfile" "$context/"
  for image in "${IMAGES[@]}"; do
    local binary ref=ghcr.io/kedacore/$image:$TAG
    binary=$(binary_of "$image")
    cp "$CACHE_DIR/keda-$KEDA_VERSION/bin/$binary" "$context/"
    log "keda: building $ref"
    docker build -q --build-arg BINARY="$binary" -t "$ref" "$context" >/dev/null
    docker save "$ref" -o "$STORE/$image.tar.tmp"
    mv "$STORE/$image.tar.tmp" "$STORE/$image.tar"
    rm -f "$context/$binary"
  done
  rm -rf "$context"
}

# Imports the images the node does not list yet.
load_images() {
  local listed image
  listed=$(kubectl get nodes -o jsonpath='{.items[*].status.images[*].names}')
  for image in "${IMAGES[@]}"; do
    [[ $listed == *"ghcr.io/kedacore/$image:$TAG"* ]] || "$HACK_DIR/load-image.sh" "$STORE/$image.tar"
  done
}

# KEDA's manifests, on stdout.
manifests() {
  local work status=0
  work=$(mktemp -d)
  cp -r "$(module_dir)/config" "$work/config"
  chmod -R u+w "$work"
  sed "s/KEDA_TAG/$TAG/" "$HACK_DIR/keda/kustomization.yaml" >"$work/kustomization.yaml"
  kubectl kustomize "$work" || status=$?
  rm -rf "$work"
  return $status
}

wait_ready() {
  kubectl -n keda rollout status deployment/keda-operator --timeout=180s >&2
  kubectl -n keda rollout status deployment/keda-metrics-apiserver --timeout=180s >&2
  kubectl wait apiservice/v1beta1.external.metrics.k8s.io --for=condition=Available --timeout=120s >&2
}

up() {
  if [ "$mode" = local ]; then
    build_images
    load_images
  fi
  manifests | kubectl apply --server-side -f - >&2
  wait_ready
  log "keda $KEDA_VERSION: ready on the $mode cluster in $((SECONDS - start))s"
}

# KEDA's operator removes the finalizers of ScaledObjects and ScaledJobs: they go first,
# while it still runs (KEDA's uninstall order). Otherwise they, their namespaces and
# KEDA's CRDs would wait forever for an operator that is gone. Should it be gone
# already, their finalizers are dropped instead.
remove_scaled_resources() {
  local resource namespace name operator_runs=0
  kubectl -n keda get deployment keda-operator >/dev/null 2>&1 && operator_runs=1
  for resource in scaledobjects.keda.sh scaledjobs.keda.sh; do
    kubectl get crd "$resource" >/dev/null 2>&1 || continue
    if [ $operator_runs = 1 ]; then
      kubectl delete "$resource" --all --all-namespaces --wait=true --timeout=120s >&2 && continue
    fi
    kubectl get "$resource" --all-namespaces --no-headers \
      -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name |
      while read -r namespace name; do
        kubectl -n "$namespace" patch "$resource" "$name" --type=merge \
          -p '{"metadata":{"finalizers":null}}' >&2
      done
  done
}

down() {
  remove_scaled_resources
  manifests | kubectl delete --ignore-not-found --wait=true --timeout=300s -f - >&2
  log "keda: removed from the $mode cluster in $((SECONDS - start))s"
}

"$action"
