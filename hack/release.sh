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
# The image is built on the project's own engine (hack/image.sh --local, as `make
# image-local`); an engine this script started is stopped again. PJ_RELEASE_IMAGE
# names the image otherwise (a registry's name, to push it there).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_DIR/kube-target.sh"

version=$(tr -d '[:space:]' <"$REPO_ROOT/VERSION")
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]] || die "VERSION: not a version: '$version'"
image=${PJ_RELEASE_IMAGE:-paralleljob-operator:$version}
dist=$REPO_ROOT/dist
manifest=$dist/paralleljob-operator-$version.yaml
archive=$dist/paralleljob-operator-$version.image.tar
type -P kubectl >/dev/null || die "'kubectl' is missing: run make build (builds the pinned kubectl)"
start=$SECONDS

engine_was_running=0
"$HACK_DIR/dockerd.sh" status >/dev/null 2>&1 && engine_was_running=1
overlay=$(mktemp -d)
cleanup() {
  rm -rf "$overlay"
  [ $engine_was_running = 1 ] || "$HACK_DIR/dockerd.sh" stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

built=$("$HACK_DIR/image.sh" --local)
use_local_docker
"$DOCKER" tag "$built" "$image"

mkdir -p "$dist"
manifests_overlay "$overlay" "$image" >"$overlay/kustomization.yaml"
{
  echo "# paralleljob-operator $version: the CRDs, RBAC, policies, namespace and operator."
  echo "# Install or upgrade: kubectl apply --server-side -f paralleljob-operator-$version.yaml"
  echo "# The image, $image: paralleljob-operator-$version.image.tar beside this file"
  echo "# (kind load image-archive ...), or push it to a registry your nodes pull from."
  kubectl kustomize "$overlay"
} >"$manifest.tmp"
mv "$manifest.tmp" "$manifest"
"$DOCKER" save -o "$archive.tmp" "$image"
chmod 0644 "$archive.tmp"
mv "$archive.tmp" "$archive"
(cd "$dist" && sha256sum "$(basename "$manifest")" "$(basename "$archive")" >SHA256SUMS)
log "release: $version in $((SECONDS - start))s: $(realpath --relative-to="$REPO_ROOT" "$manifest"), $(realpath --relative-to="$REPO_ROOT" "$archive") ($(($(stat -c %s "$archive") / 1000000)) MB)"
