#!/usr/bin/env bash
# Installs the Debian packages the local image path needs, only those
# missing: docker.io (dockerd + the Debian docker client) and debootstrap
# (the base image). A second run touches nothing.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# shellcheck disable=SC2034 # read by apt_install_missing through a nameref
declare -A PACKAGES=(
  [docker.io]="the docker engine that builds the operator image (hack/dockerd.sh)"
  [debootstrap]="assembles the Debian python3 base image (hack/base-image.sh)"
)
apt_install_missing "image tools" PACKAGES
