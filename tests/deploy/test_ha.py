"""High availability (issue 9, part 3) on the local cluster: the leader SIGKILLed (by
its host PID, as a crash would) is replaced by a new leader -- its restarted container,
which still owns the Lease's identity, or the standby -- and killing the leader every
few seconds through a 500-pod run loses and doubles nothing."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.wait import wait_until

from .conftest import SYSTEM_NAMESPACE, Kubectl
from .test_in_cluster import LEASE

pytestmark = [pytest.mark.localcluster, pytest.mark.kwok]

REPO = Path(__file__).resolve().parents[2]
CONTAINERD_SOCK = REPO / ".cluster" / "containerd" / "containerd.sock"
FINALIZER = "paralleljob.dev/tracking"


def _holder(kubectl: Kubectl) -> str:
    lease = kubectl.json("-n", SYSTEM_NAMESPACE, "get", "lease", LEASE)
    return str(lease["spec"].get("holderIdentity") or "")


def _running_leader(kubectl: Kubectl) -> dict[str, Any] | None:
    """The operator pod named in the Lease, if it runs a ready container."""
    holder = _holder(kubectl)
    pods = kubectl.json(
        "-n", SYSTEM_NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/component=operator"
    )
    for pod in pods["items"]:
        statuses = pod["status"].get("containerStatuses") or []
        if pod["metadata"]["name"] == holder and statuses and statuses[0].get("ready"):
            return dict(pod)
    return None


def _host_pid(pod: dict[str, Any]) -> int:
    """The host PID of the pod's container process, from the node's containerd."""
    container = pod["status"]["containerStatuses"][0]["containerID"].rpartition("://")[2]
    tasks = subprocess.run(
        ["ctr", "--address", str(CONTAINERD_SOCK), "--namespace", "k8s.io", "tasks", "ls"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in tasks.splitlines()[1:]:
        fields = line.split()
        if fields and fields[0] == container:
            return int(fields[1])
    raise AssertionError(f"container {container} not among containerd's tasks")


def _kill_leader(kubectl: Kubectl) -> tuple[str, float]:
    """SIGKILLs the leader's process; returns its pod and when (time.monotonic())."""
    pod = wait_until(lambda: _running_leader(kubectl), timeout=120, what="a running leader")
    os.kill(_host_pid(pod), signal.SIGKILL)
    return str(pod["metadata"]["name"]), time.monotonic()


def _pj(name: str, completions: int, parallelism: int, duration: str) -> dict[str, Any]:
    return {
        "apiVersion": "paralleljob.dev/v1alpha1",
        "kind": "ParallelJob",
        "metadata": {"name": name},
        "spec": {
            "completions": completions,
            "parallelism": parallelism,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"kwok.paralleljob.dev/duration": duration}},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"type": "kwok"},
                    "tolerations": [
                        {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                    "containers": [{"name": "main", "image": "busybox:1.35.0"}],
                },
            },
        },
    }


def _pods_of(kubectl: Kubectl, namespace: str, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl.json(
        "-n", namespace, "get", "pods", "-l", f"paralleljob.dev/job-name={name}"
    )["items"]
    return items


def _status(kubectl: Kubectl, namespace: str, name: str) -> dict[str, Any]:
    return dict(
        kubectl.json("-n", namespace, "get", "paralleljobs.paralleljob.dev", name).get("status")
        or {}
    )


def _complete(kubectl: Kubectl, namespace: str, name: str) -> bool:
    conds = _status(kubectl, namespace, name).get("conditions") or []
    return any(c["type"] == "Complete" and c["status"] == "True" for c in conds)


def test_failover_after_the_leader_is_sigkilled(deployed: Kubectl, watched: str) -> None:
    victim, killed = _kill_leader(deployed)
    # Only a leader acts on a job created after the kill.
    deployed.run("-n", watched, "apply", "-f", "-", input=json.dumps(_pj("after-kill", 1, 1, "0s")))
    wait_until(
        lambda: _pods_of(deployed, watched, "after-kill"),
        timeout=60,
        interval=0.1,
        what="the new leader's first pod",
    )
    failover = time.monotonic() - killed
    new_leader = _holder(deployed)
    print(f"\nfailover: {failover:.1f} s (killed {victim}; new leader {new_leader})")
    wait_until(lambda: _complete(deployed, watched, "after-kill"), timeout=60, what="complete")


def test_leader_killed_every_few_seconds_through_a_500_pod_run(
    deployed: Kubectl, watched: str
) -> None:
    name = "ha-churn"
    deployed.run("-n", watched, "apply", "-f", "-", input=json.dumps(_pj(name, 500, 50, "1s")))
    chaos = random.Random(3)
    kills = 0
    while not _complete(deployed, watched, name):
        # The chaos schedule itself: the leader lives 3-6 s between kills.
        time.sleep(chaos.uniform(3, 6))
        if _complete(deployed, watched, name):
            break
        _kill_leader(deployed)
        kills += 1
        assert kills < 200, "the job does not finish"
    status = _status(deployed, watched, name)
    pods = _pods_of(deployed, watched, name)
    succeeded = [p for p in pods if p["status"].get("phase") == "Succeeded"]
    assert len(pods) == 500, "no pod created twice"
    assert status["succeeded"] == len(succeeded) == 500, "each pod counted once"
    assert not status.get("failed")
    held = [p for p in pods if FINALIZER in (p["metadata"].get("finalizers") or [])]
    assert held == []
    assert kills >= 3
