#!/usr/bin/env bash
# Installs the Debian packages of hack/prereqs.txt (every one a make target
# needs), only those that are missing, so that a second run is a no-op that
# touches nothing.
# Usage: hack/install-prereqs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

declare -A PACKAGES=()
while read -r package _commands why; do
  [[ -z $package || $package == \#* ]] && continue
  # shellcheck disable=SC2034 # read by apt_install_missing through a nameref
  PACKAGES[$package]=$why
done <"$HACK_DIR/prereqs.txt"
apt_install_missing prereqs PACKAGES
