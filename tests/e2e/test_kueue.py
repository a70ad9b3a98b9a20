"""A ParallelJob's pods queued by Kueue (docs/kueue.md): the example
``manifests/examples/kueue``, applied to the test's namespace as ``kubectl -n NS apply -k``
applies it, with Kueue's plain-pod integration admitting each pod only while its
ClusterQueue has quota (1 CPU; the job asks for three pods of 500m at a time).

It runs where Kueue is installed: ``make test-kueue`` runs it after Kueue's own suite,
before uninstalling it; anywhere else it is skipped. The example's cluster-scoped queue
and flavor get the namespace as a suffix, so that runs never share them.

What is checked: the job completes all six with no failure; Kueue made a Workload for
every pod and finished them all; and never more than two of the job's pods ran at once
(their containers' start and finish times), where without Kueue three would.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from paralleljob import constants as c
from paralleljob.runtime.events import COMPONENT
from tests.support.wait import wait_until

from .conftest import Operator
from .support import Kubectl, kubectl

pytestmark = [pytest.mark.realnode]

EXAMPLE = Path(__file__).resolve().parents[2] / "manifests" / "examples" / "kueue"
CLUSTER_QUEUE_CRD = "clusterqueues.kueue.x-k8s.io"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# The ClusterQueue's 1 CPU over the pods' 500m.
ADMITTED_AT_ONCE = 2


@pytest.fixture(scope="module", autouse=True)
def kueue_installed(kubeconfig: str) -> None:
    if kubectl("get", "crd", CLUSTER_QUEUE_CRD, check=False).returncode != 0:
        pytest.skip("Kueue is not installed: make test-kueue runs this with Kueue installed")


@pytest.fixture
def example(namespace: str) -> Iterator[list[dict[str, Any]]]:
    """The example rendered, its cluster-scoped names suffixed with the namespace; the
    cluster-scoped objects deleted afterwards."""
    rendered = kubectl("kustomize", str(EXAMPLE)).stdout
    objects = [o for o in yaml.safe_load_all(rendered) if o]
    renames = {
        o["metadata"]["name"]: f"{o['metadata']['name']}-{namespace}"
        for o in objects
        if o["kind"] in ("ClusterQueue", "ResourceFlavor")
    }
    for o in objects:
        o["metadata"]["name"] = renames.get(o["metadata"]["name"], o["metadata"]["name"])
        if o["kind"] == "ClusterQueue":
            for group in o["spec"]["resourceGroups"]:
                for flavor in group["flavors"]:
                    flavor["name"] = renames[flavor["name"]]
        if o["kind"] == "LocalQueue":
            o["spec"]["clusterQueue"] = renames[o["spec"]["clusterQueue"]]
    try:
        yield objects
    finally:
        # The ParallelJob first (the operator fixture's cleanup), then what Kueue keeps a
        # finalizer on while workloads use it.
        for kind in ("clusterqueue", "resourceflavor"):
            for name in renames.values():
                kubectl("delete", kind, name, "--ignore-not-found", "--wait=false", check=False)


def overlap(pods: list[dict[str, Any]]) -> int:
    """The most containers that ran at once, from their start and finish times (half-open
    intervals: one finishing in the second another starts does not overlap it)."""
    edges: list[tuple[datetime, int]] = []
    for pod in pods:
        state = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        edges.append((datetime.fromisoformat(state["startedAt"]), 1))
        edges.append((datetime.fromisoformat(state["finishedAt"]), -1))
    running = most = 0
    for _, step in sorted(edges):
        running += step
        most = max(most, running)
    return most


# Kueue's scheduler posts Pending on the Workload of a pod that does not fit the quota yet.
@pytest.mark.warnings("Pending")
def test_a_paralleljob_s_pods_wait_in_a_kueue_queue_for_quota(
    operator: Operator, namespace: str, k: Kubectl, example: list[dict[str, Any]]
) -> None:
    listed = {"apiVersion": "v1", "kind": "List", "items": example}
    k.run("apply", "-f", "-", input=json.dumps(listed))
    [job] = [o for o in example if o["kind"] == "ParallelJob"]
    name, completions = job["metadata"]["name"], job["spec"]["completions"]
    assert QUEUE_LABEL in job["spec"]["template"]["metadata"]["labels"]

    wait_until(lambda: k.finished(name), timeout=240, what=f"{name} finished")
    status = k.status(name)
    assert (k.finished(name), status.get("succeeded"), status.get("failed", 0)) == (
        "Complete",
        completions,
        0,
    ), status

    pods = [p for p in k.pods(name) if p["status"].get("phase") == "Succeeded"]
    assert len(pods) == completions, [p["metadata"]["name"] for p in pods]
    assert overlap(pods) <= ADMITTED_AT_ONCE, [
        p["status"]["containerStatuses"][0]["state"]["terminated"] for p in pods
    ]

    def workloads_finished() -> list[dict[str, Any]] | None:
        items: list[dict[str, Any]] = k.json("get", "workloads.kueue.x-k8s.io")["items"]
        finished = [
            w
            for w in items
            if any(
                x["type"] == "Finished" and x["status"] == "True"
                for x in w.get("status", {}).get("conditions", [])
            )
        ]
        return items if len(finished) == len(items) >= completions else None

    workloads = wait_until(workloads_finished, timeout=60, what="a finished Workload per pod")
    owners = {ref["name"] for w in workloads for ref in w["metadata"].get("ownerReferences", [])}
    assert {p["metadata"]["name"] for p in pods} <= owners, owners


def test_a_job_managed_by_the_operator_is_queued_and_admitted_by_kueue(
    operator: Operator, namespace: str, k: Kubectl, example: list[dict[str, Any]]
) -> None:
    """A batch/v1 Job with ``spec.managedBy`` naming the operator, in the example's
    LocalQueue: Kueue's webhook creates it suspended, Kueue admits it as a whole (its two
    pods of 500m fit the 1 CPU), and the operator, not kube-controller-manager, runs it."""
    queues = [o for o in example if o["kind"] != "ParallelJob"]
    listed = {"apiVersion": "v1", "kind": "List", "items": queues}
    k.run("apply", "-f", "-", input=json.dumps(listed))
    [local_queue] = [o["metadata"]["name"] for o in queues if o["kind"] == "LocalQueue"]
    [pj] = [o for o in example if o["kind"] == "ParallelJob"]
    labels = {"app.kubernetes.io/name": "queued-job"}
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "queued-job", "labels": {QUEUE_LABEL: local_queue}},
        "spec": {
            "managedBy": c.MANAGED_BY,
            "completions": 2,
            "parallelism": 2,
            "template": {**pj["spec"]["template"], "metadata": {"labels": labels}},
        },
    }
    created = json.loads(k.run("create", "-f", "-", "-o", "json", input=json.dumps(body)).stdout)
    assert created["spec"].get("suspend") is True, "Kueue's webhook creates it suspended"

    def complete() -> dict[str, Any] | None:
        job: dict[str, Any] = k.json("get", "job", "queued-job")
        conditions = job.get("status", {}).get("conditions") or []
        done = any(x["type"] == "Complete" and x["status"] == "True" for x in conditions)
        return job if done else None

    job = wait_until(complete, timeout=180, what="queued-job Complete")
    assert (job["status"].get("succeeded"), job["status"].get("failed", 0)) == (2, 0)
    [workload] = k.json("get", "workloads.kueue.x-k8s.io")["items"]
    conditions = {x["type"]: x["status"] for x in workload["status"]["conditions"]}
    assert (conditions.get("QuotaReserved"), conditions.get("Finished")) == ("True", "True")
    events = k.json("get", "events", "--field-selector", "involvedObject.name=queued-job")
    creators = {
        e.get("source", {}).get("component") or e.get("reportingComponent")
        for e in events["items"]
        if e["reason"] == "SuccessfulCreate"
    }
    assert creators == {COMPONENT}, "the operator created its pods, and nothing else did"
