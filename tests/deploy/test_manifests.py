"""Every manifest and example passes server-side dry-run; undeploy and deploy again work."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from .conftest import CRD, DEPLOYMENT, REPO, SYSTEM_NAMESPACE, WATCHED, Kubectl, deploy_local

pytestmark = [pytest.mark.cluster]

EXAMPLES = sorted((REPO / "manifests" / "examples").glob("*.yaml"))
#: manifests/kueue-policy.yaml: a policy and its binding of this name, cluster-scoped.
KUEUE_POLICY = "paralleljob-operator-kueue-suspend"


def test_manifests_pass_server_side_dry_run(deployed: Kubectl) -> None:
    out = deployed.run(
        "apply",
        "-k",
        str(REPO / "manifests"),
        "--dry-run=server",
        "--server-side",
        "--force-conflicts",
        "--field-manager=dry-run-test",
    )
    applied = out.stdout.splitlines()
    for kind in (
        "namespace/",
        "customresourcedefinition",
        "serviceaccount/",
        "clusterrole.",
        "clusterrolebinding.",
        "role.rbac.authorization.k8s.io/paralleljob-operator-leader-election",
        "rolebinding.rbac.authorization.k8s.io/paralleljob-operator-leader-election",
        "configmap/",
        "deployment",
        "poddisruptionbudget.policy/paralleljob-operator",
        f"mutatingadmissionpolicy.admissionregistration.k8s.io/{KUEUE_POLICY}",
        f"mutatingadmissionpolicybinding.admissionregistration.k8s.io/{KUEUE_POLICY}",
    ):
        assert any(line.startswith(kind) for line in applied), (kind, out.stdout)
    # The same through the plain client-side path a user may take.
    deployed.run("apply", "-k", str(REPO / "manifests"), "--dry-run=server")


@pytest.mark.parametrize(
    "example", [p for p in EXAMPLES if p.name != "kustomization.yaml"], ids=lambda p: p.stem
)
def test_example_passes_server_side_dry_run(
    deployed: Kubectl, namespace: str, example: Path
) -> None:
    out = deployed.run("-n", namespace, "apply", "-f", str(example), "--dry-run=server")
    kinds = {d["kind"].lower() for d in yaml.safe_load_all(example.read_text()) if d}
    assert kinds <= {"paralleljob", "parallelcronjob"}, kinds
    for kind in kinds:
        assert f"{kind}.paralleljob.dev/" in out.stdout, out.stdout


def test_examples_kustomization_passes_server_side_dry_run(
    deployed: Kubectl, namespace: str
) -> None:
    out = deployed.run(
        "-n", namespace, "apply", "-k", str(REPO / "manifests" / "examples"), "--dry-run=server"
    )
    assert out.stdout.count("paralleljob.paralleljob.dev/") == 4, out.stdout


def test_workqueue_example_passes_server_side_dry_run(deployed: Kubectl, namespace: str) -> None:
    """manifests/examples/workqueue: its kustomization (Redis and the producer), then each
    work-queue ParallelJob (applied once the queue is full, so not in the kustomization)."""
    example = REPO / "manifests" / "examples" / "workqueue"
    out = deployed.run("-n", namespace, "apply", "-k", str(example), "--dry-run=server")
    for created in ("service/redis", "deployment.apps/redis", "job.batch/enqueue-items"):
        assert created in out.stdout, out.stdout
    for name in ("multi-workqueue-job", "single-workqueue-job"):
        out = deployed.run(
            "-n", namespace, "apply", "-f", str(example / f"{name}.yaml"), "--dry-run=server"
        )
        assert f"paralleljob.paralleljob.dev/{name}" in out.stdout, out.stdout


@pytest.mark.localcluster
def test_undeploy_then_deploy_local_again(deployed: Kubectl) -> None:
    """Last in this module on purpose: it takes the operator away and brings it back
    (after a deploy with a bad configuration, which must fail loudly and fast)."""
    try:
        deployed.make("undeploy")
        assert deployed.run("get", "namespace", SYSTEM_NAMESPACE, check=False).returncode != 0
        assert deployed.run("get", "crd", CRD, check=False).returncode != 0
        for role in ("paralleljob-operator", "paralleljob-edit", "paralleljob-view"):
            assert deployed.run("get", "clusterrole", role, check=False).returncode != 0, role
        assert (
            deployed.run(
                "get", "clusterrolebinding", "paralleljob-operator", check=False
            ).returncode
            != 0
        )
        # Cluster-scoped, so not gone with the namespace: undeploy deletes them itself.
        for kind in ("mutatingadmissionpolicy", "mutatingadmissionpolicybinding"):
            assert deployed.run("get", kind, KUEUE_POLICY, check=False).returncode != 0, kind

        # A bad configuration fails the deploy at once, with the operator's one line.
        bad = subprocess.run(
            ["make", "-C", str(REPO), "--no-print-directory", "deploy-local"],
            env=dict(deployed.env, PJ_WATCH_NAMESPACES=f"{WATCHED},no-such-namespace"),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert bad.returncode != 0, bad.stdout + bad.stderr
        # Read from the pod's status (FallbackToLogsOnError: "--- operator exit"), which,
        # unlike the crashed container's log, the kubelet keeps across the restart; else
        # from the log ("--- operator log").
        why = "paralleljob-operator: error: namespace 'no-such-namespace' does not exist"
        assert re.search(rf"^(--- operator exit: )?{re.escape(why)}$", bad.stderr, re.M), bad.stderr
    finally:
        # Whatever failed above, the tests after this one need the operator back.
        deploy_local(deployed)
    deploy = deployed.json("-n", SYSTEM_NAMESPACE, "get", "deployment", DEPLOYMENT)
    assert deploy["status"].get("availableReplicas") == 2
    deployed.run("get", "crd", CRD)
