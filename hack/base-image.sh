#!/usr/bin/env bash
# Assembles the local stand-in for python:3.11-slim from Debian packages, for
# machines that reach apt but no container registry:
#   debootstrap (minbase, from the mirror of the machine's apt sources or
#   PJ_DEBIAN_MIRROR) + Debian's python3 (3.11 on bookworm) + python3-venv,
#   the machine's CA bundle (so `pip install` inside an unmodified Dockerfile
#   verifies TLS as the host does), imported with `docker import`.
#
# The result is cached, keyed by every input (this script, suite,
# packages, CA bundle): the rootfs tarball under $CACHE_DIR/base-image/ and
# the image in the docker engine as paralleljob-base:<key>. Prints the image
# reference on stdout; everything else goes to stderr.
#
# Usage: DOCKER_HOST=... hack/base-image.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SUITE=${PJ_BASE_SUITE:-bookworm}
PACKAGES=python3,python3-venv
CA_BUNDLE=${PJ_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
DOCKER_CLI=${PJ_DOCKER_CLI:-/usr/bin/docker}
[ -x "$DOCKER_CLI" ] || DOCKER_CLI=$(command -v docker || echo /usr/bin/docker)

[ -r "$CA_BUNDLE" ] || die "CA bundle $CA_BUNDLE not readable (set PJ_CA_BUNDLE)"
key=$({
  sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1
  echo "$SUITE $PACKAGES"
  sha256sum "$CA_BUNDLE" | cut -d' ' -f1
} | sha256sum | cut -c1-12)
IMAGE=paralleljob-base:$key
CACHE=$CACHE_DIR/base-image
TARBALL=$CACHE/$SUITE-python3-$key.tar.gz

if "$DOCKER_CLI" image inspect "$IMAGE" >/dev/null 2>&1; then
  log "base image: $IMAGE cached"
  echo "$IMAGE"; exit 0
fi

if [ ! -s "$TARBALL" ]; then
  require_cmd debootstrap "run 'make prereqs' (hack/install-prereqs.sh)"
  start=$SECONDS
  mkdir -p "$CACHE"
  work=$(mktemp -d "$CACHE/build.XXXXXX")
  cleanup() {
    # debootstrap mounts proc/sys in the target; never delete across a mount.
    grep -o " $work/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
    rm -rf --one-file-system "$work"
  }
  trap cleanup EXIT
  mirror=$(debian_mirror "$SUITE")
  log "base image: debootstrap $SUITE (minbase + $PACKAGES) from $mirror"
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work/rootfs" "$mirror" \
    >"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
  r=$work/rootfs
  # TLS: the machine's bundle where Debian's OpenSSL and pip look for one.
  mkdir -p "$r/etc/ssl/certs" "$r/usr/lib/ssl"
  install -m 0644 "$CA_BUNDLE" "$r/etc/ssl/certs/ca-certificates.crt"
  ln -sfn /etc/ssl/certs/ca-certificates.crt "$r/usr/lib/ssl/cert.pem"
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$r/etc/pip.conf"
  # python:3.11-slim has `python`; so does this image.
  ln -sfn python3 "$r/usr/bin/python"
  # Slim it: no docs, man pages, locales, apt lists or caches, logs.
  rm -rf "$r"/usr/share/{doc,man,info,locale,lintian,linda}/* "$r"/var/lib/apt/lists/* \
    "$r"/var/cache/apt/* "$r"/var/cache/debconf/*-old "$r"/var/log/* "$r"/tmp/* \
    "$r"/usr/share/python-wheels/*.tmp 2>/dev/null || true
  find "$r/usr/lib/python3"* -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null || true
  : >"$r/etc/machine-id"
  tar --numeric-owner -C "$r" -czf "$TARBALL.tmp" .
  mv "$TARBALL.tmp" "$TARBALL"
  log "base image: rootfs $(du -h "$TARBALL" | cut -f1) built in $((SECONDS - start))s"
fi

log "base image: importing $TARBALL as $IMAGE"
"$DOCKER_CLI" import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["python3"]' \
  "$TARBALL" "$IMAGE" >/dev/null
# Base images of earlier inputs are no use any more.
"$DOCKER_CLI" images --format '{{.Repository}}:{{.Tag}}' paralleljob-base | grep -vx "$IMAGE" \
  | xargs -r "$DOCKER_CLI" rmi >/dev/null 2>&1 || true
find "$CACHE" -maxdepth 1 -name "$SUITE-python3-*.tar.gz" ! -name "$(basename "$TARBALL")" -delete
echo "$IMAGE"
