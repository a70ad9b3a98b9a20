#!/usr/bin/env bash
# Puts the operator image on the cluster's node and prints its reference. The
# image carries both console scripts: paralleljob-operator (its entrypoint)
# and paralleljob-worker (the work-queue worker, docs/worker.md).
#
#   hack/node-image.sh local   build on Debian's docker engine (hack/image.sh
#                              --local), import into the local cluster's
#                              containerd (hack/load-image.sh; needs root)
#   hack/node-image.sh kind    build with docker (hack/image.sh), kind load
#                              docker-image into the kind cluster hack/deploy.sh
#                              kind would use ($KIND_CLUSTER_NAME, else the
#                              current context's, else "paralleljob")
#
# hack/deploy.sh (make deploy, make deploy-local) and the e2e tests
# (tests/e2e/test_workqueue.py) use it. On the node the image has two names:
# paralleljob-operator:<id> (from the image's content: what the operator's
# Deployment and the e2e tests run) and paralleljob-operator:dev (the image
# this script loaded last: what manifests/examples/workqueue runs).
#
# Cached by the build's inputs (the Dockerfile, .dockerignore and what it lets
# into the build context, the base image and the build flags): when the image
# built from the same inputs is on the node under both names, nothing is built
# and no docker engine is started. After `make cluster-down` and `make
# cluster` (an empty node) the local mode imports the tarball it kept, still
# without building. PJ_IMAGE: no build, that image is loaded as it is (under
# its own name only). Logs go to stderr; stdout has the image reference only.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_DIR/kube-target.sh"

mode=${1:-}
case $mode in kind | local) ;; *) die "usage: $0 kind|local" ;; esac
IMAGE_NAME=${PJ_IMAGE_NAME:-paralleljob-operator}
DEV_IMAGE=$IMAGE_NAME:dev
STORE=$CACHE_DIR/images/operator
mkdir -p "$STORE"
# Without a registry, kind's engine builds from the Debian base, as hack/deploy.sh kind.
[ "$mode" != kind ] || ! kind_here_wanted || use_kind_here
use_cluster "$mode"
kubectl version >/dev/null 2>&1 || die "the $mode cluster does not answer ($(kube_desc))"

# The name a node lists an image under: docker.io/library/NAME:TAG for Docker
# Hub's official images, docker.io/USER/NAME:TAG for Docker Hub's others.
node_name() {
  local first=${1%%/*}
  if [[ $1 != */* ]]; then
    echo "docker.io/library/$1"
  elif [[ $first != *.* && $first != *:* && $first != localhost ]]; then
    echo "docker.io/$1"
  else
    echo "$1"
  fi
}

# on_node REF...: whether one image on a node has every name REF.
on_node() {
  local images line ref found
  images=$(kubectl get nodes -o jsonpath='{range .items[*].status.images[*]}{.names}{"\n"}{end}' 2>/dev/null) || return 1
  while IFS= read -r line; do
    found=1
    for ref in "$@"; do
      [[ $line == *"\"$(node_name "$ref")\""* ]] || { found=0; break; }
    done
    [ $found = 0 ] || return 0
  done <<<"$images"
  return 1
}

# The build's inputs, hashed: what hack/image.sh hands `docker build`.
source_key() {
  (
    cd "$REPO_ROOT" || exit 1
    printf '%s\n' "mode=$mode" "local=${PJ_IMAGE_LOCAL_BUILD:-}" "name=$IMAGE_NAME" "base=${PJ_BASE_IMAGE:-}" "flags=${PJ_DOCKER_BUILD_FLAGS:-}"
    if { [ "$mode" = local ] || [ -n "${PJ_IMAGE_LOCAL_BUILD:-}" ]; } && [ -z "${PJ_BASE_IMAGE:-}" ]; then
      # What hack/base-image.sh keys its image by.
      printf '%s\n' "suite=${PJ_BASE_SUITE:-}"
      sha256sum hack/base-image.sh "${PJ_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
    fi
    # .dockerignore is an allow-list: its `!PATH` lines are the build context,
    # less what its other lines exclude (caches and build metadata).
    mapfile -t context < <(sed -n 's|^!\(.*[^/]\)/*$|\1|p' .dockerignore)
    find Dockerfile .dockerignore hack/image.sh "${context[@]}" -type f \
      ! -path '*/__pycache__/*' ! -name '*.pyc' ! -path '*.egg-info/*' -print0 \
      | LC_ALL=C sort -z | xargs -0 sha256sum
  ) | sha256sum | cut -c1-16
}

# Sets DOCKER, the client, and in the local mode DOCKER_HOST, the engine
# hack/image.sh --local builds on (started if none runs).
use_docker() {
  if [ "$mode" = local ]; then
    DOCKER_HOST=${DOCKER_HOST:-$("$HACK_DIR/dockerd.sh" env | sed -n 's/^export DOCKER_HOST=//p')}
    [ -n "$DOCKER_HOST" ] || die "no docker engine"
    export DOCKER_HOST
    DOCKER=${PJ_DOCKER_CLI:-/usr/bin/docker}
    [ -x "$DOCKER" ] || DOCKER=docker
  else
    require_cmd docker "run 'make prereqs' (Debian's docker.io), or install Docker Engine"
    DOCKER=docker
  fi
}

build() {
  local args=()
  # kind here (hack/kube-target.sh use_kind_here): no registry for the base image either.
  if [ "$mode" = local ] || [ -n "${PJ_IMAGE_LOCAL_BUILD:-}" ]; then args=(--local); fi
  "$HACK_DIR/image.sh" "${args[@]}"
}

# 1. Which image, and whether the node has it already.
names=()
if [ -n "${PJ_IMAGE:-}" ]; then
  image=$PJ_IMAGE
  names=("$image")
  if on_node "${names[@]}"; then
    log "node image: $image already on the node"
    echo "$image"
    exit 0
  fi
else
  key=$(source_key)
  record=$STORE/source-$key
  image=$(cat "$record" 2>/dev/null || true)
  if [ -n "$image" ] && on_node "$image" "$DEV_IMAGE"; then
    log "node image: $image already on the node (build inputs $key unchanged)"
    echo "$image"
    exit 0
  fi
fi

# 2. Build it if needed, and load it.
if [ "$mode" = kind ]; then
  require_cmd kind "run 'make build' (builds the pinned kind $KIND_VERSION)"
  use_docker
  if [ -z "${PJ_IMAGE:-}" ]; then
    if [ -z "$image" ] || ! "$DOCKER" image inspect "$image" >/dev/null 2>&1; then
      image=$(build)
      echo "$image" >"$record"
    fi
    "$DOCKER" tag "$image" "$DEV_IMAGE"
    names=("$image" "$DEV_IMAGE")
  fi
  log "node image: kind load docker-image ${names[*]} --name $KIND_CLUSTER_NAME"
  kind load docker-image "${names[@]}" --name "$KIND_CLUSTER_NAME" >&2
else
  [ -x "$HACK_DIR/load-image.sh" ] || die "hack/load-image.sh is missing (the local cluster's image importer)"
  [ -n "${PJ_IMAGE:-}" ] || names=("$image" "$DEV_IMAGE")
  # The tarball holds every name the node should get (docker save of several
  # tags of one image keeps them all).
  suffix=
  [ ${#names[@]} -le 1 ] || suffix=+dev
  tarball=$STORE/${image//[:\/]/_}$suffix.tar
  if [ -z "$image" ] || [ ! -s "$tarball" ]; then
    use_docker
    if [ -z "${PJ_IMAGE:-}" ]; then
      if [ -z "$image" ] || ! "$DOCKER" image inspect "$image" >/dev/null 2>&1; then
        image=$(build)
        echo "$image" >"$record"
      fi
      "$DOCKER" tag "$image" "$DEV_IMAGE"
      names=("$image" "$DEV_IMAGE")
      tarball=$STORE/${image//[:\/]/_}+dev.tar
    fi
    # Only the latest image is worth keeping.
    rm -f "$STORE"/*.tar
    "$DOCKER" save -o "$tarball.tmp" "${names[@]}"
    mv "$tarball.tmp" "$tarball"
  fi
  log "node image: importing ${names[*]} into the node's containerd"
  "$HACK_DIR/load-image.sh" "$tarball" >&2
fi
# A few records of earlier trees (other branches) are worth keeping.
find "$STORE" -maxdepth 1 -name 'source-*' -printf '%T@ %p\n' | sort -rn | tail -n +21 | cut -d' ' -f2- | xargs -r rm -f
echo "$image"
