# Shared helpers for the hack/ scripts. Source it; do not run it.
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
