"""A node deleted under running pods (issue 34), judged against the built-in Job
controller on the same spec: two kwok nodes of the test's own, a ParallelJob run by two
operator replicas on one and a batch/v1 Job run by kube-controller-manager on the other;
both nodes deleted. The pod garbage collector fails the pods it finds bound to no node
(DisruptionTarget, DeletionByPodGC) and deletes them: both jobs must end with the same
counts and conditions, and no finalizer left."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Pair
from tests.e2e.support import KWOK_TOLERATION, Kubectl, kubectl
from tests.support.wait import wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.localcluster, pytest.mark.kwok]

#: The label that puts a job's pods on the test's own node.
NODE_LABEL = "paralleljob.dev/chaos-node"
COMPLETIONS, PARALLELISM = 4, 2
TAINT = str(KWOK_TOLERATION["key"])


def _node(name: str) -> dict[str, Any]:
    """A kwok node (kwok plays the kubelet of every node with its annotation)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {NODE_LABEL: name, "kubernetes.io/hostname": name, "type": "kwok-chaos"},
        },
        "spec": {
            "taints": [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]
        },
    }


@pytest.fixture
def nodes(namespace: str) -> Iterator[dict[str, str]]:
    """A node for each controller, named after the test's namespace."""
    names = {"pj": f"{namespace}-pj", "job": f"{namespace}-job"}
    manifest = {"apiVersion": "v1", "kind": "List", "items": [_node(n) for n in names.values()]}
    kubectl("apply", "-f", "-", input=json.dumps(manifest))
    try:
        yield names
    finally:
        kubectl("delete", "node", *names.values(), "--ignore-not-found", "--wait=false")


def _template(node: str) -> dict[str, Any]:
    """A pod that runs (on kwok) far longer than the test."""
    return {
        "metadata": {"annotations": {"kwok.paralleljob.dev/duration": "3600s"}},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {NODE_LABEL: node},
            "tolerations": [KWOK_TOLERATION],
            "containers": [{"name": "main", "image": "busybox:1.35.0"}],
        },
    }


def _outcome(job: dict[str, Any]) -> tuple[Any, ...]:
    """What both controllers must agree on: the counts and the conditions (type, status,
    reason), in order."""
    status = job.get("status") or {}
    conditions = tuple(
        (c["type"], c["status"], c.get("reason", "")) for c in status.get("conditions") or []
    )
    counts = tuple(status.get(key, 0) for key in ("active", "succeeded", "failed", "ready"))
    return counts, conditions


def _finished(job: dict[str, Any]) -> bool:
    return any(
        c["type"] in ("Complete", "Failed") and c["status"] == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def _pods_with(k: Kubectl, selector: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = k.json("get", "pods", "-l", selector)["items"]
    return items


def _running(pods: list[dict[str, Any]]) -> int:
    return sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")


@pytest.mark.long
def test_a_node_deleted_under_running_pods_ends_as_with_the_built_in_controller(
    pair: Pair, k: Kubectl, nodes: dict[str, str]
) -> None:
    spec = {"completions": COMPLETIONS, "parallelism": PARALLELISM, "backoffLimit": 0}
    k.create_pj("lost", _template(nodes["pj"]), **spec)
    k.create_job("lost", _template(nodes["job"]), **spec)
    pj_pods, job_pods = "paralleljob.dev/job-name=lost", "batch.kubernetes.io/job-name=lost"
    wait_until(
        lambda: _running(_pods_with(k, pj_pods)) == _running(_pods_with(k, job_pods)) == 2,
        timeout=60,
        what="both jobs' pods running",
    )
    kubectl("delete", "node", *nodes.values(), "--wait=false")
    # The pod garbage collector's quarantine of pods on a missing node is 40 s.
    wait_until(
        lambda: _finished(k.json("get", "pj", "lost")) and _finished(k.json("get", "job", "lost")),
        timeout=240,
        what="both jobs finished",
    )

    def settled() -> tuple[Any, Any] | None:
        pj, job = k.json("get", "pj", "lost"), k.json("get", "job", "lost")
        pods = _pods_with(k, pj_pods) + _pods_with(k, job_pods)
        if any(p["metadata"].get("finalizers") for p in pods):
            return None  # the trackers still release them
        return _outcome(pj), _outcome(job)

    pj_outcome, job_outcome = wait_until(settled, timeout=120, what="every finalizer released")
    print(f"\nnode lost: operator {pj_outcome}, built-in {job_outcome}")
    assert pj_outcome == job_outcome, f"operator {pj_outcome} != built-in {job_outcome}"
    counts, conditions = pj_outcome
    assert counts[2] >= 1 and ("Failed", "True", "BackoffLimitExceeded") in conditions
