"""The operator, running in-cluster from its image, drives real pods to Complete (a
ParallelJob; on the local cluster, with the built-in Job controller off, a plain batch/v1
Job too), and its own pod passes the `restricted` Pod Security Standard."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.wait import wait_until

from .conftest import (
    DEPLOYMENT,
    LEASE,
    REPO,
    SERVICE_ACCOUNT,
    SYSTEM_NAMESPACE,
    Kubectl,
    parallel_job,
)

pytestmark = [pytest.mark.cluster]


def _operator_pods(kubectl: Kubectl) -> list[dict[str, Any]]:
    """The two replicas, both running (one leads, one stands by)."""
    pods = kubectl.json(
        "-n", SYSTEM_NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/component=operator"
    )["items"]
    running: list[dict[str, Any]] = [p for p in pods if p["status"].get("phase") == "Running"]
    assert len(running) == 2, (
        f"expected two running operator pods, got {[p['metadata']['name'] for p in pods]}"
    )
    return running


def _leader(kubectl: Kubectl) -> str:
    """The name of the pod holding the Lease (its identity is its pod's name)."""
    lease = kubectl.json("-n", SYSTEM_NAMESPACE, "get", "lease", LEASE)
    holder: str = lease["spec"].get("holderIdentity") or ""
    assert holder in {p["metadata"]["name"] for p in _operator_pods(kubectl)}, lease["spec"]
    return holder


def _operator_logs(kubectl: Kubectl) -> str:
    """Both replicas' logs: a standby's too, should it have led earlier."""
    return "\n".join(
        kubectl.run("-n", SYSTEM_NAMESPACE, "logs", p["metadata"]["name"], "--tail=-1").stdout
        for p in _operator_pods(kubectl)
    )


def test_operator_runs_from_its_image(deployed: Kubectl) -> None:
    deploy = deployed.json("-n", SYSTEM_NAMESPACE, "get", "deployment", DEPLOYMENT)
    assert deploy["status"].get("availableReplicas") == 2
    for pod in _operator_pods(deployed):
        container = pod["spec"]["containers"][0]
        assert container["image"].startswith("paralleljob-operator:")
        assert container["imagePullPolicy"] == "IfNotPresent"
        status = pod["status"]["containerStatuses"][0]
        assert status["ready"] is True, "a standby is ready too"
        assert status["restartCount"] == 0, "the operator restarted: liveness failing or crashing"


@pytest.mark.parametrize("zone", ["America/New_York", "US/Eastern", "Etc/GMT+5"])
def test_the_image_knows_every_time_zone_without_the_systems_database(
    deployed: Kubectl, zone: str
) -> None:
    """A ParallelCronJob's timeZone is read from the tzdata package the image installs:
    with the system's zone database hidden (PYTHONTZPATH empty), a zone and a backward
    link (US/Eastern) still load, so no base image turns them into UnknownTimeZone."""
    [pod, *_] = _operator_pods(deployed)
    code = (
        "from paralleljob.core.cron.cron_schedule import load_time_zone; "
        f"print(load_time_zone({zone!r}))"
    )
    result = deployed.run(
        "-n", SYSTEM_NAMESPACE, "exec", pod["metadata"]["name"], "--",
        "env", "PYTHONTZPATH=", "python3", "-c", code, check=False,
    )  # fmt: skip
    assert (result.returncode, result.stdout.strip()) == (0, zone), result.stderr


def test_one_replica_leads_and_the_other_stands_by(deployed: Kubectl) -> None:
    leader = _leader(deployed)
    lease = deployed.json("-n", SYSTEM_NAMESPACE, "get", "lease", LEASE)["spec"]
    assert lease["leaseDurationSeconds"] == 9
    for pod in _operator_pods(deployed):
        name = pod["metadata"]["name"]

        def logs(pod_name: str = name) -> str:
            return deployed.run("-n", SYSTEM_NAMESPACE, "logs", pod_name, "--tail=-1").stdout

        acquired = f"acquired lease {SYSTEM_NAMESPACE}/{LEASE} as {name}"
        if name == leader:
            assert acquired in logs(), logs()
            continue

        # A standby is ready before its first look at the Lease has been logged.
        def standby_log(pod_name: str = name, held_by: str = f"is held by {leader}") -> str | None:
            text = logs(pod_name)
            return text if f"lease {SYSTEM_NAMESPACE}/{LEASE} {held_by}" in text else None

        text = wait_until(standby_log, timeout=30, what=f"the standby {name} naming the leader")
        assert acquired not in text, text


def test_reconciles_a_parallel_job_with_real_pods(deployed: Kubectl, watched: str) -> None:
    namespace = watched
    name = "in-cluster"
    deployed.run("-n", namespace, "delete", "pj", name, "--ignore-not-found", "--wait")
    deployed.run("-n", namespace, "apply", "-f", "-", input=json.dumps(parallel_job(name)))

    def complete() -> dict[str, Any] | None:
        pj = deployed.json("-n", namespace, "get", "paralleljobs.paralleljob.dev", name)
        conds = {c["type"]: c["status"] for c in pj.get("status", {}).get("conditions", [])}
        return pj if conds.get("Complete") == "True" else None

    pj = wait_until(complete, timeout=180, interval=1, what=f"ParallelJob {name} to be Complete")
    assert pj["status"]["succeeded"] == 3
    assert not pj["status"].get("failed")

    table = deployed.run("-n", namespace, "get", "pj", name).stdout
    assert "Complete" in table and "3/3" in table, table

    pods = deployed.json("-n", namespace, "get", "pods")["items"]
    ours = [
        p
        for p in pods
        if any(
            r.get("uid") == pj["metadata"]["uid"] for r in p["metadata"].get("ownerReferences", [])
        )
    ]
    assert sum(p["status"]["phase"] == "Succeeded" for p in ours) == 3, [
        (p["metadata"]["name"], p["status"]["phase"]) for p in ours
    ]
    # Real pods on the real node (not the simulated kwok node).
    for p in ours:
        node = deployed.json("get", "node", p["spec"]["nodeName"])
        assert "kwok.x-k8s.io/node" not in node["metadata"].get("annotations", {}), p["spec"][
            "nodeName"
        ]

    # It was the in-cluster operator that did it: the leader.
    logs = deployed.run("-n", SYSTEM_NAMESPACE, "logs", _leader(deployed), "--tail=-1").stdout
    assert name in logs, "the in-cluster leader's log never mentions the ParallelJob"


def _restart_controller_manager(builtin_job_controller: str) -> None:
    subprocess.run(
        [str(REPO / "hack" / "cluster-restart.sh"), "kube-controller-manager"],
        env=dict(os.environ, PJ_BUILTIN_JOB_CONTROLLER=builtin_job_controller),
        capture_output=True,
        check=True,
        timeout=180,
    )


@pytest.fixture
def builtin_job_controller_off() -> Iterator[None]:
    """kube-controller-manager without its Job controller for one test
    (PJ_BUILTIN_JOB_CONTROLLER=off, docs/local-cluster.md), then with it again."""
    _restart_controller_manager("off")
    try:
        yield
    finally:
        _restart_controller_manager("on")


@pytest.mark.localcluster
def test_a_plain_job_is_run_by_the_deployed_operator_as_the_clusters_job_controller(
    deployed: Kubectl, watched: str, builtin_job_controller_off: None
) -> None:
    """docs/jobs.md: `make cluster PJ_BUILTIN_JOB_CONTROLLER=off` and `make deploy-local
    PJ_MANAGE_JOBS=all` (what the deployed fixture ran): a Job that names no controller
    completes, run by the operator alone."""
    name = "plain"
    deployed.run("-n", watched, "delete", "job", name, "--ignore-not-found", "--wait")
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": 2,
            "parallelism": 2,
            "template": parallel_job(name)["spec"]["template"],
        },
    }
    deployed.run("-n", watched, "create", "-f", "-", input=json.dumps(job))

    def complete() -> dict[str, Any] | None:
        got: dict[str, Any] = deployed.json("-n", watched, "get", "job", name)
        conds = {c["type"]: c["status"] for c in got.get("status", {}).get("conditions", [])}
        return got if conds.get("Complete") == "True" else None

    got = wait_until(complete, timeout=120, what=f"Job {name} Complete")
    assert "managedBy" not in got["spec"], "a Job that names no controller"
    assert (got["status"]["succeeded"], got["status"].get("failed", 0)) == (2, 0)
    events = deployed.json(
        "-n", watched, "get", "events", "--field-selector", f"involvedObject.name={name}"
    )["items"]
    reasons = {(e["reason"], e["source"].get("component")) for e in events}
    assert {
        ("SuccessfulCreate", "paralleljob-operator"),
        ("Completed", "paralleljob-operator"),
    } <= reasons, reasons
    assert {component for _, component in reasons} == {"paralleljob-operator"}, reasons
    pods = deployed.json("-n", watched, "get", "pods", "-l", f"batch.kubernetes.io/job-name={name}")
    labels = [p["metadata"]["labels"] for p in pods["items"]]
    assert len(labels) == 2 and all("paralleljob.dev/controller-uid" in x for x in labels), labels
    deployed.run("-n", watched, "delete", "job", name, "--wait")


def test_operator_pod_is_admitted_under_restricted(deployed: Kubectl, namespace: str) -> None:
    # Its own namespace enforces `restricted`, and it runs there.
    ns = deployed.json("get", "namespace", SYSTEM_NAMESPACE)
    assert ns["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") == "restricted"
    _operator_pods(deployed)

    # And its pod template is admitted, as is, in any namespace enforcing it.
    deployed.run(
        "label",
        "namespace",
        namespace,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
        "--overwrite",
    )
    deployed.run("-n", namespace, "create", "serviceaccount", SERVICE_ACCOUNT)
    template = deployed.json("-n", SYSTEM_NAMESPACE, "get", "deployment", DEPLOYMENT)["spec"][
        "template"
    ]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "operator-pss-check",
            "labels": template["metadata"].get("labels", {}),
        },
        "spec": template["spec"],
    }
    admitted = deployed.run(
        "-n", namespace, "create", "--dry-run=server", "-f", "-", input=json.dumps(pod), check=False
    )
    assert admitted.returncode == 0, admitted.stderr
    assert "warning" not in admitted.stderr.lower(), admitted.stderr

    # The check has teeth: the same pod minus its hardening is refused there.
    weak = copy.deepcopy(pod)
    weak["metadata"]["name"] = "weak-pss-check"
    weak["spec"].pop("securityContext", None)
    for c in weak["spec"]["containers"]:
        c.pop("securityContext", None)
    refused = deployed.run(
        "-n",
        namespace,
        "create",
        "--dry-run=server",
        "-f",
        "-",
        input=json.dumps(weak),
        check=False,
    )
    assert refused.returncode != 0 and "PodSecurity" in refused.stderr, refused.stderr


def test_least_privilege_is_enough(deployed: Kubectl, watched: str) -> None:
    """After real work (and kopf's namespace/CRD scanning, and the Lease), nothing was
    refused to either replica."""
    logs = _operator_logs(deployed)
    refused = [
        line
        for line in logs.splitlines()
        if "forbidden" in line.lower() or "Not enough permissions" in line
    ]
    assert not refused, "\n".join(refused)
