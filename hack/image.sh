#!/usr/bin/env bash
# Builds the operator image from the Dockerfile.
#
#   hack/image.sh          docker on PATH, BASE_IMAGE as the Dockerfile says
#                          (python:3.11-slim from Docker Hub): the kind path
#   hack/image.sh --local  Debian's docker engine (started by hack/dockerd.sh
#                          if none runs) and the Debian base image assembled
#                          by hack/base-image.sh: no registry needed
#
# Tags the image paralleljob-operator:dev and paralleljob-operator:<id>, where
# <id> comes from the image's content, so every new build rolls the
# Deployment and an unchanged one does not. Prints that reference on stdout.
# PJ_BASE_IMAGE overrides the base image in either mode; PJ_DOCKER_BUILD_FLAGS
# adds `docker build` flags; PJ_IMAGE_CONTEXT builds another tree (its own Dockerfile:
# hack/release.sh --previous, a worktree of an earlier commit).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

IMAGE_NAME=${PJ_IMAGE_NAME:-paralleljob-operator}
context=${PJ_IMAGE_CONTEXT:-$REPO_ROOT}
mode=docker
[ "${1:-}" = --local ] && mode=local

build_args=()
if [ "$mode" = local ]; then
  use_local_docker
  base=${PJ_BASE_IMAGE:-$("$HACK_DIR/base-image.sh")}
  # The engine has no bridge: RUN steps (pip) use the host's network.
  build_args+=(--network host)
  # Debian's client has BuildKit built in, without the buildx plugin.
  export DOCKER_BUILDKIT=1
else
  require_cmd docker "run 'make prereqs' (Debian's docker.io), or install Docker Engine"
  DOCKER=docker
  base=${PJ_BASE_IMAGE:-}
fi
[ -z "$base" ] || build_args+=(--build-arg "BASE_IMAGE=$base")
# Extra `docker build` flags, e.g. PJ_DOCKER_BUILD_FLAGS="--network host --progress plain".
read -r -a extra <<<"${PJ_DOCKER_BUILD_FLAGS:-}"
build_args+=("${extra[@]}")

start=$SECONDS
log "image: building $IMAGE_NAME:dev${base:+ on $base}"
logfile=$(mktemp)
trap 'rm -f "$logfile"' EXIT
if ! "$DOCKER" build "${build_args[@]}" -t "$IMAGE_NAME:dev" "$context" >"$logfile" 2>&1; then
  tail -n 40 "$logfile" >&2
  die "docker build failed"
fi
id=$("$DOCKER" image inspect -f '{{.Id}}' "$IMAGE_NAME:dev")
tag=${id#sha256:}
tag=${tag:0:12}
"$DOCKER" tag "$IMAGE_NAME:dev" "$IMAGE_NAME:$tag"
# Earlier builds' content tags would pile up in the engine: drop them.
"$DOCKER" images --format '{{.Repository}}:{{.Tag}}' "$IMAGE_NAME" \
  | grep -E ":[0-9a-f]{12}$" | grep -vx "$IMAGE_NAME:$tag" | xargs -r "$DOCKER" rmi >/dev/null 2>&1 || true
size=$("$DOCKER" image inspect -f '{{.Size}}' "$IMAGE_NAME:dev")
log "image: $IMAGE_NAME:$tag ($((size / 1000000)) MB) built in $((SECONDS - start))s"
echo "$IMAGE_NAME:$tag"
