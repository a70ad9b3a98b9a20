#!/usr/bin/env bash
# A docker engine for the local path (make deploy-local, make image-local).
#
#   hack/dockerd.sh start   reuse a running engine, or start Debian's dockerd
#   hack/dockerd.sh stop    stop the dockerd this script started (by its PID file)
#   hack/dockerd.sh status  say which engine would be used
#   hack/dockerd.sh env     print `export DOCKER_HOST=...` for the engine in use
#
# An engine is reused when one answers: $DOCKER_HOST if set, else ours, else
# the system socket /var/run/docker.sock. Otherwise dockerd is started with
# its own data root, exec root, socket and PID file under $CACHE_DIR (outside
# the repo, so the layer cache survives `git clean` and is shared by clones),
# and with no bridge and no iptables rules at all: builds run with
# `--network host`, so it can never collide with the cluster's bridge or CIDRs,
# nor flip the FORWARD policy the cluster's pod traffic relies on.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DOCKERD_DIR=${PJ_DOCKERD_DIR:-$CACHE_DIR/dockerd}
DOCKER_DATA_ROOT=${PJ_DOCKER_DATA_ROOT:-$CACHE_DIR/docker-data}
PIDFILE=$DOCKERD_DIR/dockerd.pid
SOCK=$DOCKERD_DIR/docker.sock
LOGFILE=$DOCKERD_DIR/dockerd.log
# Debian's client matches Debian's dockerd (API 1.41, BuildKit built in);
# another client may come first on PATH.
DOCKER_CLI=${PJ_DOCKER_CLI:-/usr/bin/docker}
[ -x "$DOCKER_CLI" ] || DOCKER_CLI=$(command -v docker || echo /usr/bin/docker)

answers() { DOCKER_HOST=$1 timeout 10 "$DOCKER_CLI" version --format '{{.Server.Version}}' >/dev/null 2>&1; }

our_pid() {
  local pid
  [ -f "$PIDFILE" ] || return 1
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  [ "$(basename "$(readlink "/proc/$pid/exe" 2>/dev/null)")" = dockerd ] || return 1
  echo "$pid"
}

# Prints the DOCKER_HOST of an engine that answers, or fails.
running_engine() {
  if [ -n "${DOCKER_HOST:-}" ]; then answers "$DOCKER_HOST" && echo "$DOCKER_HOST"; return; fi
  if our_pid >/dev/null && answers "unix://$SOCK"; then echo "unix://$SOCK"; return; fi
  if [ -S /var/run/docker.sock ] && answers unix:///var/run/docker.sock; then
    echo unix:///var/run/docker.sock; return
  fi
  return 1
}

start() {
  local host pid
  if host=$(running_engine); then log "docker engine: reusing $host"; echo "$host"; return; fi
  [ -z "${DOCKER_HOST:-}" ] || die "DOCKER_HOST=$DOCKER_HOST does not answer; unset it to let $0 start dockerd"
  require_cmd dockerd "run 'make prereqs' (hack/install-prereqs.sh: Debian's docker engine)"
  mkdir -p "$DOCKERD_DIR" "$DOCKER_DATA_ROOT"
  if pid=$(our_pid); then die "dockerd $pid (from $PIDFILE) runs but does not answer on $SOCK; see $LOGFILE"; fi
  rm -f "$PIDFILE" "$SOCK"
  log "docker engine: starting dockerd (data root $DOCKER_DATA_ROOT, log $LOGFILE)"
  # setsid: the engine outlives the make that started it; stop it with `hack/dockerd.sh stop`.
  setsid dockerd \
    --host "unix://$SOCK" \
    --pidfile "$PIDFILE" \
    --data-root "$DOCKER_DATA_ROOT" \
    --exec-root "$DOCKERD_DIR/exec" \
    --storage-driver overlay2 \
    --exec-opt native.cgroupdriver=cgroupfs \
    --bridge none --iptables=false --ip6tables=false --ip-masq=false --ip-forward=false \
    --userland-proxy=false \
    >"$LOGFILE" 2>&1 </dev/null &
  local deadline=$((SECONDS + 60))
  until answers "unix://$SOCK"; do
    if ! kill -0 $! 2>/dev/null; then tail -n 20 "$LOGFILE" >&2; die "dockerd exited; see $LOGFILE"; fi
    [ $SECONDS -lt $deadline ] || die "dockerd did not answer within 60s; see $LOGFILE"
    sleep 0.5
  done
  log "docker engine: dockerd $(cat "$PIDFILE") ready on unix://$SOCK"
  echo "unix://$SOCK"
}

stop() {
  local pid
  if ! pid=$(our_pid); then log "docker engine: no dockerd started by this script is running"; return; fi
  log "docker engine: stopping dockerd $pid"
  terminate "$pid" dockerd
  rm -f "$PIDFILE"
}

case ${1:-status} in
  start) start >/dev/null ;;
  env) host=$(start) && echo "export DOCKER_HOST=$host" ;;
  stop) stop ;;
  status)
    if host=$(running_engine); then
      echo "docker engine: $host$(pid=$(our_pid) && [ "$host" = "unix://$SOCK" ] && echo " (dockerd $pid, started by hack/dockerd.sh)")"
    else
      echo "docker engine: none running"; exit 1
    fi ;;
  *) die "usage: $0 start|stop|status|env" ;;
esac
