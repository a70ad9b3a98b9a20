#!/usr/bin/env bash
# Kueue (make kueue, make kueue-down), pinned by KUEUE_VERSION in versions.env: the same
# install hack/test-kueue.sh runs its e2e suite on.
#
#   hack/kueue.sh up [local|kind]    install Kueue and wait until its manager serves
#   hack/kueue.sh down [local|kind]  remove it: its webhooks first, its CRDs while the
#                                    manager still runs, then the rest
#
# The manifests are Kueue's own e2e config (test/e2e/config/default of the pinned
# module's source) through hack/kueue/ (fitted to one node), rendered into
# $CACHE_DIR/kueue-$KUEUE_VERSION/kueue.yaml. No registry is reachable: the manager's
# image is built here from the module (hack/images/build_image.py kueue) and loaded into
# the node(s), the local cluster's containerd or kind's. local is the default when
# .cluster/kubeconfig exists.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_DIR/kube-target.sh"

action='' mode=''
up_down_args "$@"  # sets both
kubectl version >/dev/null 2>&1 || die "the $mode cluster does not answer ($(kube_desc))"

KUEUE_DIR=$CACHE_DIR/kueue-$KUEUE_VERSION
MANIFEST=$KUEUE_DIR/kueue.yaml
start=$SECONDS

# The manager's image, built once per version, into the node(s).
load_image() {
  local ref tarball
  read -r ref tarball < <(python3 "$HACK_DIR/images/build_image.py" --cache-dir "$CACHE_DIR" kueue)
  [ -s "$tarball" ] || die "build_image.py built no kueue image"
  if [ "$mode" = local ]; then
    "$HACK_DIR/load-image.sh" "$tarball"
  else
    log "kueue: kind load image-archive $ref"
    kind load image-archive "$tarball" --name "$KIND_CLUSTER_NAME" >&2
  fi
}

# Kueue's e2e config with hack/kueue/ beside it in the module's source tree, the image
# set to the one built here, rendered into $MANIFEST.
render() {
  local overlay=$KUEUE_DIR/src/test/e2e/config/paralleljob
  local config=$KUEUE_DIR/src/test/e2e/config/default/controller_manager_config.yaml
  rm -rf "$overlay" && cp -r "$HACK_DIR/kueue" "$overlay"
  # The manager's configuration: the e2e config's own, with hack/kueue's lines under its
  # `integrations:` (one top-level key, whose entries are indented by two spaces).
  [ "$(grep -c '^integrations:$' "$config")" = 1 ] ||
    die "kueue: $config has not exactly one 'integrations:' line to add externalFrameworks under"
  ! grep -q '^  externalFrameworks:' "$config" ||
    die "kueue: $config sets externalFrameworks already: merge hack/kueue's by hand"
  sed "/^integrations:\$/r $HACK_DIR/kueue/manager-config-integrations.yaml" "$config" \
    >"$overlay/controller_manager_config.yaml"
  cat >>"$overlay/kustomization.yaml" <<EOF

images:
- name: us-central1-docker.pkg.dev/k8s-staging-images/kueue/kueue
  newName: registry.k8s.io/kueue/kueue
  newTag: $KUEUE_VERSION
EOF
  kubectl kustomize "$overlay" >"$MANIFEST.tmp"
  grep -q '"ParallelJob.v1alpha1.paralleljob.dev"' "$MANIFEST.tmp" ||
    die "kueue: the rendered manager config lacks the ParallelJob external framework"
  mv "$MANIFEST.tmp" "$MANIFEST"
}

up() {
  "$HACK_DIR/build.sh" kueue
  load_image
  render
  log "kueue $KUEUE_VERSION: installing ($MANIFEST)"
  kubectl apply --server-side -f "$MANIFEST" >/dev/null
  kubectl -n kueue-system rollout status deploy/kueue-controller-manager --timeout=5m >&2
  log "kueue $KUEUE_VERSION: ready on the $mode cluster in $((SECONDS - start))s"
}

# Kueue's objects whose CRD deletion waits on a finalizer no manager will remove any
# more lose it, so that nothing is left half-deleted.
release_finalizers() {
  local crd ns name
  for crd in $(kubectl get crds -o name | grep -E '\.kueue\.x-k8s\.io$' | cut -d/ -f2); do
    while read -r ns name; do
      [ "$ns" != "<none>" ] || ns=  # a cluster-scoped object
      log "kueue: releasing the finalizers of $crd ${ns:+$ns/}$name"
      kubectl patch "$crd" "$name" ${ns:+--namespace="$ns"} --type=merge \
        -p '{"metadata":{"finalizers":null}}' >/dev/null || true
    done < <(kubectl get "$crd" -A --no-headers \
      -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name 2>/dev/null)
  done
}

# What admits or rejects other objects goes first (its webhooks on every pod and Job,
# the aggregated visibility API that namespace deletion asks), then its CRDs while the
# manager still runs to release its finalizers, then the rest.
down() {
  local names
  names=$(kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations,apiservices -o name |
    grep -E '/kueue-|\.kueue\.x-k8s\.io$' || true)
  [ -z "$names" ] || kubectl delete --ignore-not-found $names >/dev/null
  names=$(kubectl get crds -o name | grep -E '\.kueue\.x-k8s\.io$' || true)
  if [ -n "$names" ] && ! kubectl delete --ignore-not-found --timeout=120s $names >/dev/null; then
    release_finalizers
    kubectl delete --ignore-not-found --timeout=60s $names >/dev/null || true
  fi
  [ -f "$MANIFEST" ] || { "$HACK_DIR/build.sh" kueue && render; }
  kubectl delete --ignore-not-found --timeout=120s -f "$MANIFEST" >/dev/null 2>&1 || true
  log "kueue $KUEUE_VERSION: removed from the $mode cluster in $((SECONDS - start))s"
}

"$action"
