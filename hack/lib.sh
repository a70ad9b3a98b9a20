# Shared helpers for the hack/ scripts. Source it; do not run it.
# shellcheck shell=bash disable=SC2034
set -euo pipefail

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HACK_DIR/.." && pwd)
# shellcheck source=versions.env
source "$HACK_DIR/versions.env"

# Built binaries live outside the repo, keyed by version, so a fresh clone
# on the same machine reuses them and a pin change rebuilds only that part.
CACHE_DIR=${PJ_CACHE_DIR:-$HOME/.cache/paralleljob-operator}
export GOTOOLCHAIN=local
export GOFLAGS=-mod=mod

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

require_cmd() {
  local cmd=$1 hint=$2
  command -v "$cmd" >/dev/null 2>&1 || die "'$cmd' is missing: $hint"
}

# apt_install_missing LABEL PACKAGES_ARRAY_NAME
# Installs the Debian packages of an associative array (package -> why it is
# needed) that are not installed yet; a second run touches nothing. Without
# root or apt it fails naming each missing package and why.
apt_install_missing() {
  local label=$1
  local -n why=$2
  local pkg missing=()
  for pkg in "${!why[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    log "$label: all Debian packages present"
    return 0
  fi
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    {
      echo "error: $label: missing Debian packages, and installing them needs root and apt-get:"
      for pkg in "${missing[@]}"; do printf '  %-28s %s\n' "$pkg" "${why[$pkg]}"; done
      echo "install them as root: apt-get install -y --no-install-recommends ${missing[*]}"
    } >&2
    exit 1
  fi
  log "$label: installing ${missing[*]}"
  # Maintainer scripts would start system services (containerd, dockerd,
  # redis-server) that the project never uses: the project runs its own. The
  # standard policy-rc.d mechanism forbids that, unless the machine has one.
  local created_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    created_policy=1
  fi
  local apt=(apt-get -qq -o DPkg::Lock::Timeout=600)
  local status=0
  # apt-get update is the slow, network-bound part: only when the lists are
  # absent, or an install fails on stale lists.
  if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" update || status=$?
  fi
  if [ $status -eq 0 ] && ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null; then
    log "$label: install failed, refreshing package lists and retrying"
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" update &&
      DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null || status=$?
  fi
  [ -z "$created_policy" ] || rm -f /usr/sbin/policy-rc.d
  [ $status -eq 0 ] || die "$label: apt-get failed installing ${missing[*]}"
  log "$label: installed ${missing[*]}"
}

# render TEMPLATE VAR...: prints TEMPLATE with every ${VAR} of the listed
# variables replaced by its value. Nothing else in the file is touched (no
# other expansion, quoting or escaping); a ${NAME} left over that is not in
# the list is an error, so a template and its caller cannot drift apart.
render() {
  local template=$1 text var leftover='\$\{[A-Za-z_][A-Za-z0-9_]*\}'
  shift
  [ -f "$template" ] || die "render: no template $template"
  IFS= read -r -d '' text <"$template" || true
  for var in "$@"; do
    [ -n "${!var+set}" ] || die "render $template: \$$var is not set"
    text=${text//"\${$var}"/"${!var}"}
  done
  [[ ! $text =~ $leftover ]] || die "render $template: ${BASH_REMATCH[0]} is not one of: $*"
  printf '%s' "$text"
}

# Whether a container registry answers (Docker Hub's, which kind's node image
# and the Dockerfile's base come from): any HTTP answer, even 401, counts.
registry_reachable() {
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 https://registry-1.docker.io/v2/ 2>/dev/null) || true
  [ -n "$code" ] && [ "$code" != 000 ]
}

# terminate PID NAME: SIGTERM, up to 30 s for it to exit, then SIGKILL (a
# process this project started, found by its PID file).
terminate() {
  local pid=$1 name=$2
  kill -TERM "$pid"
  for _ in $(seq 1 60); do [ -d "/proc/$pid" ] || return 0; sleep 0.5; done
  log "$name $pid still running after 30s; sending KILL"
  kill -KILL "$pid"
}
