# shellcheck shell=bash
# Which cluster a deploy/undeploy/demo script talks to. Source it after lib.sh.
#
#   use_cluster local   the local cluster: .cluster/kubeconfig
#   use_cluster kind    a kind cluster, through the user's own kubeconfig
#                       (PJ_USER_KUBECONFIG, else kubectl's default), never the
#                       local cluster's file: $KIND_CLUSTER_NAME if set, else
#                       the one the current context points at (kind-NAME),
#                       else "paralleljob"
#   use_cluster auto    local if it exists, else kind if that cluster exists
#
# Afterwards `kubectl` in the script means that cluster.

LOCAL_KUBECONFIG=$REPO_ROOT/.cluster/kubeconfig
KIND_CLUSTER_NAME_SET=${KIND_CLUSTER_NAME:+1}
KIND_CLUSTER_NAME=${KIND_CLUSTER_NAME:-paralleljob}
export PJ_SYSTEM_NAMESPACE=paralleljob-system
KUBE_CONTEXT=
# The pinned kubectl and kind first (kubectl as in the Makefile), even before
# make build made them.
PATH=$CACHE_DIR/kubernetes-$KUBERNETES_VERSION/bin:$CACHE_DIR/kind-$KIND_VERSION/bin:$PATH

kubectl() { command kubectl ${KUBE_CONTEXT:+--context "$KUBE_CONTEXT"} "$@"; }

# up_down_args ACTION [MODE]: an add-on script's arguments (hack/keda.sh, hack/kueue.sh):
# sets action (up or down) and mode (local, the default when the local cluster exists,
# else kind), and points kubectl at that cluster.
up_down_args() {
  action=${1:-}
  mode=${2:-}
  case $action in up | down) ;; *) die "usage: $0 up|down [local|kind]" ;; esac
  if [ -z "$mode" ]; then
    if [ -s "$LOCAL_KUBECONFIG" ]; then mode=local; else mode=kind; fi
  fi
  case $mode in local | kind) ;; *) die "usage: $0 up|down [local|kind]" ;; esac
  use_cluster "$mode"
}

use_cluster() {
  case $1 in
    local)
      export KUBECONFIG=$LOCAL_KUBECONFIG KUBE_TARGET=local
      KUBE_CONTEXT= ;;
    kind)
      # Never the local cluster's file: kind would merge its context into it.
      if [ -n "${PJ_USER_KUBECONFIG:-}" ] && [ "$PJ_USER_KUBECONFIG" != "$LOCAL_KUBECONFIG" ]; then
        export KUBECONFIG=$PJ_USER_KUBECONFIG
      else
        unset KUBECONFIG
      fi
      KUBE_TARGET=kind
      if [ -z "$KIND_CLUSTER_NAME_SET" ] && command -v kind >/dev/null 2>&1; then
        local current
        current=$(command kubectl config current-context 2>/dev/null || true)
        if [[ $current == kind-* ]] && kind get clusters 2>/dev/null | grep -qx "${current#kind-}"; then
          KIND_CLUSTER_NAME=${current#kind-}
        fi
      fi
      KUBE_CONTEXT=kind-$KIND_CLUSTER_NAME ;;
    auto)
      if [ -n "${PJ_USER_KUBECONFIG:-}" ]; then
        export KUBECONFIG=$PJ_USER_KUBECONFIG KUBE_TARGET=current; KUBE_CONTEXT=
      elif [ -s "$LOCAL_KUBECONFIG" ]; then
        use_cluster local
      elif command -v kind >/dev/null 2>&1 && kind get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER_NAME"; then
        use_cluster kind
      else
        die "no cluster: neither the local one ($LOCAL_KUBECONFIG) nor kind cluster $KIND_CLUSTER_NAME exists"
      fi ;;
    *) die "use_cluster: unknown target $1" ;;
  esac
}

# kind here: when KIND_NODE_IMAGE is set, or no registry is reachable (kind's
# node image and the Dockerfile's base both come from one), kind's engine, node
# image and cluster are hack/kind.sh's (the node image built here; the cluster
# created when missing), and the operator image is built on that engine from
# the Debian base (hack/image.sh --local, PJ_IMAGE_LOCAL_BUILD). PJ_KIND_HERE=1
# or 0 decides it instead.
kind_here_wanted() {
  case ${PJ_KIND_HERE:-} in 1) return 0 ;; 0) return 1 ;; esac
  [ -n "${KIND_NODE_IMAGE:-}" ] || ! registry_reachable
}

use_kind_here() {
  log "kind: ${KIND_NODE_IMAGE:+KIND_NODE_IMAGE=$KIND_NODE_IMAGE}${KIND_NODE_IMAGE:-no container registry reachable}: the cluster of hack/kind.sh"
  eval "$("$HACK_DIR/kind.sh" env)"
  "$HACK_DIR/kind.sh" up >/dev/null
  export PJ_USER_KUBECONFIG=$KUBECONFIG PJ_IMAGE_LOCAL_BUILD=1
}

kube_desc() {
  case $KUBE_TARGET in
    local) echo "kubeconfig $LOCAL_KUBECONFIG" ;;
    kind) echo "context $KUBE_CONTEXT" ;;
    *) echo "kubeconfig $KUBECONFIG" ;;
  esac
}
