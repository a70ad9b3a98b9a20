#!/usr/bin/env bash
# make release: dist/ for the version in VERSION, what a user installs or upgrades from
# without a checkout (no registry here: the image travels as an archive).
#
#   dist/paralleljob-operator-V.yaml       one install manifest: the CRDs, RBAC, the
#                                          policies, the namespace and the Deployment,
#                                          its image pinned to paralleljob-operator:V;
#                                          `kubectl apply --server-side -f` installs a
#                                          fresh cluster and upgrades an older install
#   dist/paralleljob-operator-V.image.tar  the image (`kind load image-archive`, or
#                                          `ctr -n k8s.io images import` on a node)
#   dist/SHA256SUMS
#
#   hack/release.sh --previous   the same for the previous release, built from the
#                                commit hack/previous-release.env names (a git worktree:
#                                that tree's own Dockerfile and manifests/), into
#                                $CACHE_DIR/releases/COMMIT/ once (make test-upgrade)
#
# Prints the manifest's path. The image is built on the project's own engine
# (hack/image.sh --local, as `make image-local`); an engine this script started is
# stopped again. PJ_RELEASE_IMAGE names the image otherwise (a registry's name, to push
# it there).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_DIR/kube-target.sh"

tree=$REPO_ROOT
dist=$REPO_ROOT/dist
if [ "${1:-}" = --previous ]; then
  # shellcheck source=previous-release.env
  source "$HACK_DIR/previous-release.env"
  commit=$PREVIOUS_RELEASE_COMMIT
  version=$PREVIOUS_RELEASE_VERSION
  dist=$CACHE_DIR/releases/$commit
  image=paralleljob-operator:$version
  if [ -s "$dist/paralleljob-operator-$version.yaml" ] && [ -s "$dist/paralleljob-operator-$version.image.tar" ]; then
    echo "$dist/paralleljob-operator-$version.yaml"
    exit 0
  fi
  git -C "$REPO_ROOT" cat-file -e "$commit^{commit}" 2>/dev/null \
    || die "the previous release's commit $commit is not in this clone's history (a shallow clone? git fetch --unshallow)"
else
  version=$(tr -d '[:space:]' <"$REPO_ROOT/VERSION")
  [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]] || die "VERSION: not a version: '$version'"
  image=${PJ_RELEASE_IMAGE:-paralleljob-operator:$version}
fi
manifest=$dist/paralleljob-operator-$version.yaml
archive=$dist/paralleljob-operator-$version.image.tar
type -P kubectl >/dev/null || die "'kubectl' is missing: run make build (builds the pinned kubectl)"
start=$SECONDS

engine_was_running=0
"$HACK_DIR/dockerd.sh" status >/dev/null 2>&1 && engine_was_running=1
overlay=$(mktemp -d)
cleanup() {
  [ "$tree" = "$REPO_ROOT" ] || git -C "$REPO_ROOT" worktree remove --force "$tree" >/dev/null 2>&1 || true
  rm -rf "$overlay"
  [ $engine_was_running = 1 ] || "$HACK_DIR/dockerd.sh" stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

if [ -n "${commit:-}" ]; then
  tree=$overlay/tree
  git -C "$REPO_ROOT" worktree add --detach --quiet "$tree" "$commit"
  log "release: building $version from $commit"
fi
# Another name than make deploy's images: their build must not retag these.
built=$(PJ_IMAGE_CONTEXT=$tree PJ_IMAGE_NAME=paralleljob-operator-release "$HACK_DIR/image.sh" --local)
use_local_docker
"$DOCKER" tag "$built" "$image"

mkdir -p "$dist"
manifests_overlay "$overlay" "$image" "$tree" >"$overlay/kustomization.yaml"
{
  echo "# paralleljob-operator $version: the CRDs, RBAC, policies, namespace and operator."
  echo "# Install or upgrade: kubectl apply --server-side -f paralleljob-operator-$version.yaml"
  echo "# The image, $image: paralleljob-operator-$version.image.tar beside this file"
  echo "# (kind load image-archive ...), or push it to a registry your nodes pull from."
  kubectl kustomize "$overlay"
} >"$manifest.tmp"
mv "$manifest.tmp" "$manifest"
# The archive is written again only when the image changed: the id of the image config
# it holds ("<id>.json", or "blobs/sha256/<id>" in an OCI layout) is the image's.
archived_id() {
  tar -xOf "$1" manifest.json 2>/dev/null \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["Config"].rsplit("/", 1)[-1].removesuffix(".json"))' 2>/dev/null
}
id=$("$DOCKER" image inspect -f '{{.Id}}' "$image")
if [ "$(archived_id "$archive")" != "${id#sha256:}" ]; then
  "$DOCKER" save -o "$archive.tmp" "$image"
  chmod 0644 "$archive.tmp"
  mv "$archive.tmp" "$archive"
fi
(cd "$dist" && sha256sum "$(basename "$manifest")" "$(basename "$archive")" >SHA256SUMS)
log "release: $version in $((SECONDS - start))s: $manifest, $(basename "$archive") ($(($(stat -c %s "$archive") / 1000000)) MB)"
echo "$manifest"
