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

deb_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# apt_install_missing LABEL PACKAGES_ARRAY_NAME
# Installs the Debian packages of an associative array (package -> why it is
# needed) that are not installed yet; a second run touches nothing. A key
# "A|B" is satisfied by either package and installs A. Without root or apt it
# fails naming each missing package and why.
apt_install_missing() {
  local label=$1
  local -n why=$2
  local entry alternative found missing=() reasons=()
  for entry in "${!why[@]}"; do
    found=
    for alternative in ${entry//|/ }; do deb_installed "$alternative" && found=1; done
    [ -n "$found" ] || { missing+=("${entry%%|*}"); reasons+=("${why[$entry]}"); }
  done
  if [ ${#missing[@]} -eq 0 ]; then
    log "$label: all Debian packages present"
    return 0
  fi
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    {
      echo "error: $label: missing Debian packages, and installing them needs root and apt-get:"
      local i
      for i in "${!missing[@]}"; do printf '  %-28s %s\n' "${missing[$i]}" "${reasons[$i]}"; done
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

# use_local_docker: DOCKER, the client, and DOCKER_HOST (exported), the project's own
# engine as hack/dockerd.sh picks it (started if none answers).
use_local_docker() {
  local host
  host=$("$HACK_DIR/dockerd.sh" env | sed -n 's/^export DOCKER_HOST=//p')
  [ -n "$host" ] || die "no docker engine"
  export DOCKER_HOST=$host
  # Debian's client matches Debian's dockerd; another client may come first on PATH.
  DOCKER=${PJ_DOCKER_CLI:-/usr/bin/docker}
  [ -x "$DOCKER" ] || DOCKER=docker
}

# manifests_overlay DIR IMAGE [TREE]: prints a kustomization in DIR of TREE's manifests/
# (default this repository's) with the operator's image pinned to IMAGE (kustomize takes
# only relative paths; a base may lie outside the root). hack/deploy.sh appends its
# configuration; hack/release.sh not.
manifests_overlay() {
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources: [\"$(realpath --relative-to="$1" "${3:-$REPO_ROOT}/manifests")\"]"
  echo "images:"
  echo "  - name: paralleljob-operator"
  echo "    newName: ${2%:*}"
  echo "    newTag: \"${2##*:}\""
}

# go_module_file MODULE@VERSION FIELD: a path `go mod download -json` reports
# for the module (FIELD Dir: its source tree; GoMod: its go.mod), fetched
# through the machine's Go configuration (GOPROXY, GONOSUMDB, GOFLAGS...).
go_module_file() {
  local path
  path=$(cd "$(mktemp -d)" && go mod download -json "$1" | sed -n "s/^\t\"$2\": \"\(.*\)\",\$/\1/p")
  [ -e "$path" ] || die "go mod download $1: no $2 (is GOPROXY reachable?)"
  echo "$path"
}

# debian_mirror SUITE: the Debian archive debootstrap fetches SUITE from:
# PJ_DEBIAN_MIRROR if set, else the first URI of the machine's own apt sources
# (deb822 /etc/apt/sources.list.d/*.sources, or one-line sources.list files)
# that serves SUITE's main component: the mirror apt itself is configured with.
debian_mirror() {
  local suite=$1 uri file sources=()
  if [ -n "${PJ_DEBIAN_MIRROR:-}" ]; then echo "$PJ_DEBIAN_MIRROR"; return; fi
  for file in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$file" ] && sources+=("$file")
  done
  uri=$(awk -v suite="$suite" '
    function flush() {
      if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && (" " comps " ") ~ / main / && uris != "") {
        split(uris, u, " "); print u[1]; found = 1; exit
      }
      types = suites = comps = uris = ""
    }
    FNR == 1 { flush() }
    FILENAME ~ /\.sources$/ {
      if ($0 ~ /^[ \t]*$/) { flush(); next }
      if ($0 ~ /^#/) next
      field = tolower($1); sub(/:$/, "", field); $1 = ""; sub(/^ +/, "")
      if (field == "types") types = $0; else if (field == "suites") suites = $0
      else if (field == "components") comps = $0; else if (field == "uris") uris = $0
      next
    }
    FILENAME ~ /\.list$/ && $1 == "deb" {
      i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
      if ($(i + 1) != suite) next
      for (j = i + 2; j <= NF; j++) if ($j == "main") { print $i; found = 1; exit }
    }
    END { if (!found) flush() }
  ' "${sources[@]}" /dev/null)
  [ -n "$uri" ] || die "no apt source for Debian $suite main on this machine: set PJ_DEBIAN_MIRROR to a Debian mirror's URL"
  echo "${uri%/}"
}

# Whether a container registry answers, for kind's node image and the
# Dockerfile's base. PJ_REGISTRY (host[:port]) is probed if set: any HTTP
# answer of its /v2/, even 401, counts. Otherwise the container engine that
# `docker` talks to is asked, with its own registry configuration (mirrors,
# proxies): it searches its default index. No engine, no registry.
registry_reachable() {
  if [ -n "${PJ_REGISTRY:-}" ]; then
    local code
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "https://$PJ_REGISTRY/v2/" 2>/dev/null) || true
    [ -n "$code" ] && [ "$code" != 000 ]
    return
  fi
  command -v docker >/dev/null 2>&1 || return 1
  timeout 15 docker search --limit 1 kindest/node >/dev/null 2>&1
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
