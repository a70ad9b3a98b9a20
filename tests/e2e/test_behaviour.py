"""Parallelism changes, API validation, backoffLimit and back-off, and SIGKILLs, on real pods."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from tests.support.wait import wait_until

from .conftest import Operator
from .support import (
    Kubectl,
    PodWatch,
    busybox_template,
    held,
    is_active,
    kill_operator_as_pods_finish,
    kubectl,
    phase,
)

IMMUTABLE = "spec.completions is immutable: it cannot be changed while the job exists"


def _active(k: Kubectl, job: str) -> int:
    return sum(1 for p in k.pods(job) if is_active(p))


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@pytest.mark.realnode
def test_parallelism_patched_up_and_down_mid_run(operator: Operator, k: Kubectl) -> None:
    name = "elastic"
    # backoffLimit 0: a single pod counted as failed would fail the job.
    k.create_pj(name, busybox_template("sleep 8"), completions=8, parallelism=2, backoffLimit=0)
    wait_until(lambda: _active(k, name) == 2, timeout=30, what="2 active pods")
    k.patch_pj(name, {"spec": {"parallelism": 5}})
    wait_until(lambda: _active(k, name) == 5, timeout=30, what="5 active pods after the patch up")
    # The status that records the patch is written after the pods it created: read on.
    wait_until(
        lambda: k.status(name).get("observedGeneration", 0) >= 2,
        timeout=30,
        what="the patch up observed in status",
    )
    k.patch_pj(name, {"spec": {"parallelism": 1}})
    wait_until(lambda: _active(k, name) == 1, timeout=30, what="1 active pod after the patch down")
    # The scale subresource drives the same field.
    kubectl("-n", k.ns, "scale", f"pj/{name}", "--replicas=4")
    wait_until(lambda: _active(k, name) == 4, timeout=30, what="4 active pods after kubectl scale")
    wait_until(lambda: k.finished(name), timeout=180, what=f"{name} done")
    status = k.status(name)
    assert k.finished(name) == "Complete", status
    assert (status["succeeded"], status["failed"]) == (8, 0)
    assert k.row(name).completions == "8/8"
    pods = k.pods(name)
    assert held(pods) == []
    assert sum(1 for p in pods if phase(p) == "Succeeded") == 8


@pytest.mark.realnode
def test_scale_subresource_reports_selector_and_active(operator: Operator, k: Kubectl) -> None:
    name = "scalable"
    k.create_pj(name, busybox_template("sleep 30"), parallelism=2)
    wait_until(lambda: k.status(name).get("active") == 2, timeout=30, what="status.active 2")
    scale = kubectl(
        "get",
        "--raw",
        f"/apis/paralleljob.dev/v1alpha1/namespaces/{k.ns}/paralleljobs/{name}/scale",
    ).stdout
    body = json.loads(scale)
    uid = k.pj(name)["metadata"]["uid"]
    assert body["spec"]["replicas"] == 2
    assert body["status"]["replicas"] == 2
    assert body["status"]["selector"] == f"paralleljob.dev/controller-uid={uid}"


@pytest.mark.cluster
def test_api_server_rejects_a_completions_change(crd: None, k: Kubectl) -> None:
    k.create_pj("fixed", busybox_template("true"), completions=3, parallelism=1, suspend=True)
    refused = k.patch_pj("fixed", {"spec": {"completions": 4}}, check=False)
    assert refused.returncode != 0 and IMMUTABLE in refused.stderr, refused.stderr
    k.create_pj("queue", busybox_template("true"), parallelism=2, suspend=True)
    refused = k.patch_pj("queue", {"spec": {"completions": 2}}, check=False)
    assert refused.returncode != 0 and IMMUTABLE in refused.stderr, refused.stderr
    # Everything else may change.
    k.patch_pj("fixed", {"spec": {"parallelism": 3, "backoffLimit": 1}})


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"parallelism": -1},
            "spec.parallelism: Invalid value: -1: "
            "spec.parallelism in body should be greater than or equal to 0",
        ),
        ({"completions": -2}, "should be greater than or equal to 0"),
        ({"backoffLimit": -1}, "should be greater than or equal to 0"),
    ],
)
def test_api_server_rejects_negative_counts(
    crd: None, k: Kubectl, spec: dict[str, Any], message: str
) -> None:
    body = {
        "apiVersion": "paralleljob.dev/v1alpha1",
        "kind": "ParallelJob",
        "metadata": {"name": "bad"},
        "spec": {**spec, "template": busybox_template("true")},
    }
    refused = k.run("create", "-f", "-", input=json.dumps(body), check=False)
    assert refused.returncode != 0 and message in refused.stderr, refused.stderr


@pytest.mark.cluster
def test_api_server_rejects_restart_policy_always(crd: None, k: Kubectl) -> None:
    body = {
        "apiVersion": "paralleljob.dev/v1alpha1",
        "kind": "ParallelJob",
        "metadata": {"name": "bad"},
        "spec": {"template": busybox_template("true", restart_policy="Always")},
    }
    refused = k.run("create", "-f", "-", input=json.dumps(body), check=False)
    assert refused.returncode != 0, refused.stdout
    assert 'supported values: "Never", "OnFailure"' in refused.stderr, refused.stderr


@pytest.mark.realnode
@pytest.mark.parametrize("operator_settings", [{"PJ_POD_BACKOFF_BASE_SECONDS": "1"}], indirect=True)
@pytest.mark.parametrize("limit", [2])
@pytest.mark.warnings("BackoffLimitExceeded")
def test_backoff_limit_p_ends_with_exactly_p_plus_1_failed_pods(
    operator: Operator, k: Kubectl, limit: int
) -> None:
    name = "always-fails"
    k.create_pj(name, busybox_template("exit 3"), completions=1, parallelism=1, backoffLimit=limit)
    wait_until(lambda: k.finished(name), timeout=120, what=f"{name} to fail")
    assert k.finished(name) == "Failed"
    cond = k.condition(name, "Failed")
    assert cond is not None and cond["reason"] == "BackoffLimitExceeded"
    pods = k.pods(name)
    assert len(pods) == limit + 1
    assert all(phase(p) == "Failed" for p in pods)
    assert k.status(name)["failed"] == limit + 1
    assert held(pods) == []


@pytest.mark.realnode
@pytest.mark.warnings("BackoffLimitExceeded")
def test_a_failed_pod_is_replaced_after_10s_and_the_backoff_survives_sigkill(
    operator: Operator, k: Kubectl
) -> None:
    name = "retry"
    k.create_pj(name, busybox_template("exit 1"), completions=1, parallelism=1, backoffLimit=1)
    wait_until(
        lambda: k.status(name).get("failed") == 1, timeout=60, what="the first failure counted"
    )
    backoff = k.status(name)["podFailureBackoff"]
    assert backoff["failuresSinceLastSuccess"] == 1
    operator.restart()  # SIGKILL during the back-off: the record is in status
    wait_until(lambda: len(k.pods(name)) == 2, timeout=60, what="the replacement pod")
    wait_until(lambda: k.finished(name), timeout=60, what=f"{name} to fail")
    first, second = sorted(k.pods(name), key=lambda p: p["metadata"]["creationTimestamp"])
    finished = first["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
    gap = (_time(second["metadata"]["creationTimestamp"]) - _time(finished)).total_seconds()
    assert gap >= 9, f"replacement after {gap}s"  # timestamps have whole seconds
    assert k.status(name)["failed"] == 2


@pytest.mark.realnode
@pytest.mark.parametrize(
    "operator_settings", [{"PJ_POD_BACKOFF_BASE_SECONDS": "0.5"}], indirect=True
)
def test_sigkill_during_a_run_keeps_counts_exact(
    operator: Operator, k: Kubectl, core_v1: Any
) -> None:
    """About half the pods fail, and the operator is SIGKILLed again and again."""
    name = "crashy"
    command = "sleep 2; exit $(( RANDOM % 2 ))"
    k.create_pj(name, busybox_template(command), completions=10, parallelism=4, backoffLimit=100)
    with PodWatch(core_v1, k.ns, name) as watch:
        kills = kill_operator_as_pods_finish(
            operator,
            k,
            watch,
            name,
            thresholds=(2, 5, 8, 11, 14),
            phases=("Succeeded", "Failed"),
            timeout=120,
        )
        wait_until(lambda: k.finished(name), timeout=240, what=f"{name} done")
    assert kills >= 3, f"only {kills} kills happened before the job finished"
    status = k.status(name)
    pods = k.pods(name)
    succeeded = sum(1 for p in pods if phase(p) == "Succeeded")
    failed = sum(1 for p in pods if phase(p) == "Failed")
    assert k.finished(name) == "Complete", status
    assert status["succeeded"] == succeeded == 10, (status, succeeded)
    assert status["failed"] == failed, (status, failed)
    assert status["uncountedTerminatedPods"] == {"succeeded": [], "failed": []}
    assert held(pods) == []
    assert len(pods) == succeeded + failed
