#!/usr/bin/env bash
# Installs the Debian packages the local image path needs, only those
# missing: docker.io (dockerd + the Debian docker client) and debootstrap
# (the base image). A second run touches nothing.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

declare -A PACKAGES=(
  [docker.io]="the docker engine that builds the operator image (hack/dockerd.sh)"
  [debootstrap]="assembles the Debian python3 base image (hack/base-image.sh)"
)
missing=()
for pkg in "${!PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
[ ${#missing[@]} -gt 0 ] || exit 0

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  {
    echo "error: missing Debian packages:"
    for pkg in "${missing[@]}"; do printf '  %-12s %s\n' "$pkg" "${PACKAGES[$pkg]}"; done
    echo "install them as root: apt-get install -y --no-install-recommends ${missing[*]}"
  } >&2
  exit 1
fi
log "image tools: installing ${missing[*]}"
# docker.io's maintainer scripts would start a system dockerd: forbid service
# starts during the install (policy-rc.d), unless the machine has a policy.
created_policy=
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  created_policy=1
fi
trap '[ -z "$created_policy" ] || rm -f /usr/sbin/policy-rc.d' EXIT
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}" >/dev/null; then
  apt-get update -qq -o DPkg::Lock::Timeout=600
  apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}" >/dev/null
fi
log "image tools: installed ${missing[*]}"
