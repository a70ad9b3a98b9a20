#!/usr/bin/env bash
# Installs the operator in a cluster from its image and manifests/.
#
#   hack/deploy.sh kind    the user's path (make deploy): the kind cluster of
#                          the current context, else $KIND_CLUSTER_NAME
#                          (default paralleljob, created if missing); builds
#                          the image with docker, `kind load docker-image`
#   hack/deploy.sh local   the local cluster (make deploy-local): Debian's
#                          docker engine (started if none runs), the same
#                          Dockerfile on a Debian-assembled base image, the
#                          image imported into the node's containerd
#
# The image (hack/node-image.sh) is skipped when the one built from the same
# inputs is on the node already; it also carries paralleljob-worker, which
# manifests/examples/workqueue runs as paralleljob-operator:dev.
#
# Both then apply the same manifests (kubectl apply -k) with the image tag
# and configuration set by a throwaway overlay, and wait for the rollout.
# Configuration (environment): any key of manifests/config.env, e.g.
# PJ_WATCH_NAMESPACES (comma list, empty: all), PJ_LOG_LEVEL, PJ_API_QPS;
# unset keeps manifests/config.env. KIND_CLUSTER_NAME (see
# above). PJ_IMAGE skips the build and deploys that image as is.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_DIR/kube-target.sh"

mode=${1:-}
case $mode in kind | local) ;; *) die "usage: $0 kind|local" ;; esac
start=$SECONDS

# 1. Tools and cluster.
if [ "$mode" = kind ]; then
  ! kind_here_wanted || use_kind_here
  missing=0
  type -P docker >/dev/null || { missing=1; echo "error: 'docker' is missing: run 'make prereqs' (Debian's docker.io), or install Docker Engine" >&2; }
  type -P kind >/dev/null || { missing=1; echo "error: 'kind' is missing: run 'make build' (builds the pinned kind $KIND_VERSION)" >&2; }
  type -P kubectl >/dev/null || { missing=1; echo "error: 'kubectl' is missing: run 'make build' (builds the pinned kubectl)" >&2; }
  [ $missing = 0 ] || exit 1
  use_cluster kind
  docker info >/dev/null 2>&1 || die "docker is installed but its engine does not answer (is the Docker daemon running? may this user use it?)"
  if ! kind get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER_NAME"; then
    log "deploy: creating kind cluster $KIND_CLUSTER_NAME"
    kind create cluster --name "$KIND_CLUSTER_NAME" --wait 120s
  fi
else
  type -P kubectl >/dev/null || die "'kubectl' is missing: run make build (builds the pinned kubectl into $CACHE_DIR)"
  [ -s "$LOCAL_KUBECONFIG" ] || die "no local cluster ($LOCAL_KUBECONFIG missing): run make cluster first"
  use_cluster local
fi
kubectl version >/dev/null 2>&1 || die "the $mode cluster does not answer ($(kube_desc)); for the local cluster run make cluster"

# 2. The image, built (cached by its inputs) and loaded into the node(s) by
# hack/node-image.sh, as paralleljob-operator:<id> and :dev.
image=$(KIND_CLUSTER_NAME=$KIND_CLUSTER_NAME "$HACK_DIR/node-image.sh" "$mode")

# 3. Manifests, through an overlay that pins the image and the configuration.
overlay=$(mktemp -d)
trap 'rm -rf "$overlay"' EXIT
{
  manifests_overlay "$overlay" "$image"
  # Every setting of config.env that the environment sets overrides it.
  overrides=()
  for key in $(sed -n 's/^\(PJ_[A-Z_]*\)=.*/\1/p' "$REPO_ROOT/manifests/config.env"); do
    [ -z "${!key+x}" ] || overrides+=("$key=${!key}")
  done
  if [ ${#overrides[@]} -gt 0 ]; then
    echo "configMapGenerator:"
    echo "  - name: paralleljob-operator-config"
    echo "    behavior: merge"
    echo "    literals:"
    printf '      - %s\n' "${overrides[@]}"
  fi
} >"$overlay/kustomization.yaml"
log "deploy: kubectl apply -k manifests/ (image $image)"
kubectl apply -k "$overlay" --server-side --force-conflicts --field-manager=paralleljob-deploy >&2
kubectl wait --for=condition=Established --timeout=60s \
  crd/paralleljobs.paralleljob.dev crd/parallelcronjobs.paralleljob.dev >/dev/null

# 4. Rollout. A pod that crashes (bad configuration: it prints one line and
# exits 1) or cannot get its image fails the deploy at once, with its log.
ns=$PJ_SYSTEM_NAMESPACE
# A pod left crash-looping by an earlier deploy of the same spec would stay in
# its back-off: replace it, so that this deploy's configuration is what is judged.
kubectl -n "$ns" get pods -l app.kubernetes.io/component=operator -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{.status.containerStatuses[0].restartCount}{"\t"}{.status.containerStatuses[0].ready}{"\n"}{end}' 2>/dev/null \
  | awk -F'\t' '$2 > 0 && $3 != "true" {print $1}' | xargs -r kubectl -n "$ns" delete pod --ignore-not-found --wait=false >&2
deadline=$((SECONDS + ${PJ_ROLLOUT_TIMEOUT:-180}))
until kubectl -n "$ns" rollout status deployment/paralleljob-operator --timeout=5s >/dev/null 2>&1; do
  stuck=$(kubectl -n "$ns" get pods -l app.kubernetes.io/component=operator -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{.spec.containers[0].image}{"\t"}{.status.containerStatuses[0].restartCount}{"\t"}{.status.containerStatuses[0].state.waiting.reason}{"\t"}{.metadata.deletionTimestamp}{"\n"}{end}' 2>/dev/null \
    | awk -F'\t' -v img="$image" '$2 == img && $5 == "" && ($3 > 0 || $4 ~ /ErrImage|ImagePull|CreateContainer|InvalidImage/) {print $1; exit}')
  if [ -n "$stuck" ] || [ $SECONDS -ge $deadline ]; then
    kubectl -n "$ns" get pods -o wide >&2 || true
    [ -z "$stuck" ] || kubectl -n "$ns" describe pod "$stuck" | sed -n '/^Events:/,$p' | tail -n 8 >&2 || true
    # Why the last run ended, as the kubelet recorded it in the pod's status
    # (FallbackToLogsOnError): unlike its log, this survives the restart. The
    # current run's when it has ended too (the kubelet may have missed the log
    # tail of one run: it reads it as the container exits).
    [ -z "$stuck" ] || kubectl -n "$ns" get pod "$stuck" \
      -o jsonpath='{range .status.containerStatuses[*]}{.state.terminated.message}{"\n"}{.lastState.terminated.message}{end}' 2>/dev/null \
      | sed -n '/./{s/^/--- operator exit: /p;q}' >&2 || true
    echo "--- operator log:" >&2
    # The run that crashed (--previous) says why; without a restart, the current one.
    kubectl -n "$ns" logs "${stuck:-deployment/paralleljob-operator}" --previous --tail=20 >&2 2>/dev/null \
      || kubectl -n "$ns" logs "${stuck:-deployment/paralleljob-operator}" --tail=20 >&2 || true
    die "the operator did not roll out${stuck:+: pod $stuck is failing}"
  fi
done
log "deploy: operator running in $ns ($mode cluster, $(kube_desc)) in $((SECONDS - start))s"
