"""manifests/examples/workqueue-scale-down as ``kubectl apply -k`` applies it (rendered with
``kubectl kustomize``): the base's Redis and producer plus the workers' RBAC, and a worker
ParallelJob that is the base's multi-workqueue-job but for what --deletion-cost needs.
On the cluster, tests/e2e/test_workqueue_scale_down.py runs it for real."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from paralleljob.worker.cli import parse_work_args

from .examples import one, render

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "manifests" / "examples" / "workqueue-scale-down"
BASE = REPO / "manifests" / "examples" / "workqueue"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    return render(EXAMPLE)


def test_it_is_the_base_plus_the_workers_rbac(rendered: list[dict[str, Any]]) -> None:
    kustomization = yaml.safe_load((EXAMPLE / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["../workqueue", "rbac.yaml"]
    assert "namespace" not in kustomization, "the namespace is the user's: kubectl -n"
    assert all("namespace" not in d["metadata"] for d in rendered)
    base = _docs(BASE / "redis.yaml") + _docs(BASE / "enqueue-job.yaml")
    for kind in ("Deployment", "Service", "Job"):
        assert one(rendered, kind) == one(base, kind)
    assert sorted(d["kind"] for d in rendered) == [
        "Deployment",
        "Job",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]


def test_the_role_lets_the_worker_get_and_patch_pods_only(rendered: list[dict[str, Any]]) -> None:
    account, role, binding = (one(rendered, k) for k in ("ServiceAccount", "Role", "RoleBinding"))
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]}]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"]}]
    [pj] = _docs(EXAMPLE / "scale-down-workqueue-job.yaml")
    assert pj["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]


def test_the_job_is_the_base_s_with_deletion_cost() -> None:
    [pj] = _docs(EXAMPLE / "scale-down-workqueue-job.yaml")
    [base] = _docs(BASE / "multi-workqueue-job.yaml")
    spec = pj["spec"]["template"]["spec"]
    [worker] = spec["containers"]
    env = {e["name"]: e for e in worker["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    args = parse_work_args(worker["command"][1:])
    assert args.deletion_cost
    # Nothing else differs from the base's worker ParallelJob.
    name = pj["metadata"]["name"]
    assert name == pj["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"]
    del spec["serviceAccountName"]
    worker["env"] = [e for e in worker["env"] if e["name"] != "POD_NAMESPACE"]
    worker["command"].remove("--deletion-cost")
    pj["metadata"]["name"] = base["metadata"]["name"]
    pj["spec"]["template"]["metadata"]["labels"] = base["spec"]["template"]["metadata"]["labels"]
    assert pj == base
