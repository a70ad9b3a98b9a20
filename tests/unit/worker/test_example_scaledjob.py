"""manifests/examples/workqueue-scaledjob as ``kubectl apply -k`` applies it (rendered with
``kubectl kustomize``): the base's Redis and producer, the namespace Secret, and a KEDA
ScaledJob whose Jobs are the seed's parallel work queue with the autoscaled example's worker,
named for the operator in ``jobTargetRef.managedBy``, one at a time, only while the stream has
lag. The ScaledJob is checked against the pinned KEDA's own CRD when its Go module is in the
module cache (``make keda`` fetches it): a field the CRD does not know would be pruned by the
API server without a word, ``managedBy`` first. On the cluster, tests/e2e/test_keda.py runs it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from paralleljob import constants as c

from .examples import one, render
from .test_example_autoscaled import keda_env

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "manifests" / "examples"
EXAMPLE = EXAMPLES / "workqueue-scaledjob"
NAME = "workqueue-scaledjob"


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    return render(EXAMPLE)


def test_it_is_the_base_s_redis_and_producer_the_namespace_secret_and_the_scaledjob(
    rendered: list[dict[str, Any]],
) -> None:
    kustomization = yaml.safe_load((EXAMPLE / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["../workqueue", "../this-namespace", "scaledjob.yaml"]
    assert "namespace" not in kustomization, "the namespace is the user's: kubectl -n"
    assert sorted(d["kind"] for d in rendered) == [
        "Deployment",
        "Job",
        "ScaledJob",
        "Secret",
        "Service",
        "ServiceAccount",
    ]
    assert all("namespace" not in d["metadata"] for d in rendered)
    # The ServiceAccount before its token Secret, as in ../workqueue-autoscaled.
    order = [d["kind"] for d in rendered]
    assert order.index("ServiceAccount") < order.index("Secret")
    assert render(EXAMPLES / "workqueue") == [
        d for d in rendered if d["kind"] in ("Deployment", "Job", "Service")
    ]


def test_one_job_at_a_time_named_for_the_operator_only_while_the_stream_has_lag(
    rendered: list[dict[str, Any]],
) -> None:
    sj = one(rendered, "ScaledJob")
    assert sj["metadata"]["name"] == NAME
    spec = sj["spec"]
    job = spec["jobTargetRef"]
    assert job["managedBy"] == c.MANAGED_BY
    assert "completions" not in job, "a work queue leaves completions unset"
    assert job["parallelism"] == 3
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (0, 1)
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (2, 2)
    assert spec["rollout"] == {"strategy": "gradual"}, "an update lets a running Job finish"
    [trigger] = spec["triggers"]
    assert trigger["type"] == "redis-streams"
    meta = trigger["metadata"]
    assert (meta["stream"], meta["consumerGroup"]) == ("items", "workers")
    # lagCount (not pendingEntriesCount): the backlog not yet delivered, active above 0.
    assert "lagCount" in meta and "pendingEntriesCount" not in meta
    assert int(meta.get("activationLagCount", "0")) == 0


def test_the_worker_is_the_autoscaled_example_s_and_keda_dials_its_redis(
    rendered: list[dict[str, Any]],
) -> None:
    sj = one(rendered, "ScaledJob")
    template = sj["spec"]["jobTargetRef"]["template"]
    autoscaled = one(render(EXAMPLES / "workqueue-autoscaled"), "ParallelJob")
    other = autoscaled["spec"]["template"]
    # The same pod but for its label and the init container that waits for the items
    # (here no Job starts before there is lag).
    assert template["metadata"]["labels"] == {"app.kubernetes.io/name": NAME}
    del other["spec"]["initContainers"]
    assert template["spec"] == other["spec"]
    assert {k: v for k, v in sj["spec"]["jobTargetRef"].items() if k != "template"} == {
        "managedBy": c.MANAGED_BY,
        "parallelism": 3,
        "backoffLimit": autoscaled["spec"]["backoffLimit"],
    }
    [worker] = [
        ct
        for ct in template["spec"]["containers"]
        if ct["name"] == sj["spec"]["envSourceContainerName"]
    ]
    [trigger] = sj["spec"]["triggers"]
    secret = one(rendered, "Secret")
    for namespace in ("wq", "any-namespace"):
        env = keda_env(worker, {secret["metadata"]["name"]: {"namespace": namespace}})
        assert env[trigger["metadata"]["addressFromEnv"]] == (
            f"redis.{namespace}.svc.cluster.local:6379"
        )


# ------------------------------------------------------------------ against KEDA's CRD


def _keda_crd(name: str) -> dict[str, Any]:
    versions = (REPO / "hack" / "versions.env").read_text()
    match = re.search(r"^KEDA_VERSION=(\S+)", versions, re.M)
    assert match is not None
    cache = os.environ.get("GOMODCACHE") or (
        subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True).stdout.strip()
        if shutil.which("go")
        else ""
    )
    path = Path(cache) / f"github.com/kedacore/keda/v2@{match[1]}/config/crd/bases/{name}"
    if not cache or not path.is_file():
        pytest.skip(f"KEDA {match[1]}'s module is not in the Go module cache (make keda)")
    crd: dict[str, Any] = yaml.safe_load(path.read_text())
    return crd


def unknown_fields(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """The fields of ``value`` that structural pruning would drop under ``schema``."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(value, list):
        return [
            f
            for i, v in enumerate(value)
            for f in unknown_fields(v, schema.get("items", {}), f"{path}[{i}]")
        ]
    if not isinstance(value, dict):
        return []
    if "properties" in schema:
        props = schema["properties"]
        return [
            f
            for k, v in value.items()
            for f in (unknown_fields(v, props[k], f"{path}.{k}") if k in props else [f"{path}.{k}"])
        ]
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        return [f for k, v in value.items() for f in unknown_fields(v, additional, f"{path}.{k}")]
    return [f"{path}.{k}" for k in value]


def test_keda_s_scaledjob_crd_keeps_every_field_managedby_included(
    rendered: list[dict[str, Any]],
) -> None:
    crd = _keda_crd("keda.sh_scaledjobs.yaml")
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    sj = one(rendered, "ScaledJob")
    assert sj["apiVersion"] == "keda.sh/v1alpha1"
    assert "managedBy" in schema["properties"]["jobTargetRef"]["properties"]
    assert unknown_fields(sj["spec"], schema, "spec") == []
    # The checker sees a field the CRD lacks.
    sj["spec"]["jobTargetRef"]["noSuchField"] = 1
    assert unknown_fields(sj["spec"], schema, "spec") == ["spec.jobTargetRef.noSuchField"]
