#!/usr/bin/env bash
# Removes everything hack/deploy.sh installed: every ParallelJob (and so
# their pods), then the operator, its RBAC, its namespace and the CRD.
#
#   hack/undeploy.sh [local|kind|auto]     default auto: the local cluster
#   if it exists, else the kind cluster $KIND_CLUSTER_NAME; PJ_USER_KUBECONFIG
#   (set by the Makefile from an explicit KUBECONFIG) wins over both.
#   PJ_UNDEPLOY_KEEP_CRD=1 leaves the CRD (and so other ParallelJobs) alone.
#
# ParallelJobs go first, while the operator still runs, so that it can
# release the finalizers it holds; only then does the operator go. Leaves
# the cluster itself (and the kind cluster) running.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_DIR/kube-target.sh"

type -P kubectl >/dev/null || die "'kubectl' is missing: run 'make build' (builds the pinned kubectl)"
use_cluster "${1:-${PJ_CLUSTER:-auto}}"
kubectl version >/dev/null 2>&1 || die "the cluster does not answer ($(kube_desc))"
log "undeploy: from the $KUBE_TARGET cluster ($(kube_desc))"

if [ -z "${PJ_UNDEPLOY_KEEP_CRD:-}" ] && kubectl get crd parallelcronjobs.paralleljob.dev >/dev/null 2>&1; then
  # First, so that none starts a ParallelJob while those are deleted.
  log "undeploy: deleting the ParallelCronJobs"
  kubectl delete parallelcronjobs.paralleljob.dev --all -A --wait --timeout=60s >&2 || true
fi
if [ -z "${PJ_UNDEPLOY_KEEP_CRD:-}" ] && kubectl get crd paralleljobs.paralleljob.dev >/dev/null 2>&1; then
  n=$(kubectl get paralleljobs.paralleljob.dev -A --no-headers 2>/dev/null | wc -l)
  if [ "$n" -gt 0 ]; then
    log "undeploy: deleting $n ParallelJob(s) while the operator still runs"
    if ! kubectl delete paralleljobs.paralleljob.dev --all -A --wait --timeout=90s >&2; then
      # The operator is gone or stuck: release its finalizers, or the CRD's
      # deletion would wait for them forever.
      log "undeploy: ParallelJobs still terminating after 90s; releasing their finalizers"
      kubectl get paralleljobs.paralleljob.dev -A --no-headers -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name \
        | while read -r ns name; do
          kubectl -n "$ns" patch paralleljobs.paralleljob.dev "$name" --type=merge -p '{"metadata":{"finalizers":null}}' >&2 || true
        done
    fi
  fi
fi

if [ -n "${PJ_UNDEPLOY_KEEP_CRD:-}" ]; then
  # Tests that found the CRD installed leave it installed.
  log "undeploy: kubectl delete -k manifests/ (keeping the CRD)"
  kubectl kustomize "$REPO_ROOT/manifests" \
    | python3 -c 'import sys; docs = sys.stdin.read().split("\n---\n"); print("\n---\n".join(d for d in docs if "kind: CustomResourceDefinition" not in d))' \
    | kubectl delete -f - --ignore-not-found --wait --timeout=180s >&2
else
  log "undeploy: kubectl delete -k manifests/"
  kubectl delete -k "$REPO_ROOT/manifests" --ignore-not-found --wait --timeout=180s >&2
fi

# With the operator gone nothing would ever release a finalizer it left on a
# pod (e.g. after a crash mid-way): release them so the pods can go.
[ -z "${PJ_UNDEPLOY_KEEP_CRD:-}" ] || { log "undeploy: done (CRD kept)"; exit 0; }
left=$(kubectl get pods -A -o jsonpath='{range .items[*]}{.metadata.namespace}{" "}{.metadata.name}{" "}{.metadata.finalizers}{"\n"}{end}' 2>/dev/null \
  | awk '$3 ~ /paralleljob/ {print $1 "/" $2}')
for ref in $left; do
  log "undeploy: releasing the operator's finalizer on pod $ref"
  kubectl -n "${ref%%/*}" patch pod "${ref#*/}" --type=json \
    -p "$(kubectl -n "${ref%%/*}" get pod "${ref#*/}" -o jsonpath='{.metadata.finalizers}' \
      | python3 -c 'import json,sys; f=json.load(sys.stdin); print(json.dumps([{"op":"test","path":"/metadata/finalizers","value":f},{"op":"replace","path":"/metadata/finalizers","value":[x for x in f if "paralleljob" not in x]}]))')" >&2 || true
done
log "undeploy: done"
