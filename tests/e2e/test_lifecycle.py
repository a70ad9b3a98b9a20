"""Rejected pod templates, suspend/resume, activeDeadlineSeconds, ttlSecondsAfterFinished
and restartPolicy OnFailure, on real pods."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.wait import wait_until

from .conftest import Operator
from .support import Kubectl, PodWatch, busybox_template, held, is_active, kubectl, phase

pytestmark = [pytest.mark.realnode]


def _events(k: Kubectl, name: str, reason: str) -> list[str]:
    items = k.json("get", "events", "--field-selector", f"involvedObject.name={name}")["items"]
    return [e["message"] for e in items if e.get("reason") == reason]


def _creation_failed(k: Kubectl, name: str) -> dict[str, Any]:
    def reported() -> dict[str, Any] | None:
        cond = k.condition(name, "PodCreationFailed")
        return cond if cond and cond.get("status") == "True" else None

    cond: dict[str, Any] = wait_until(reported, timeout=30, what=f"{name}: PodCreationFailed")
    assert cond["reason"] == "FailedCreate"
    return cond


@pytest.mark.warnings("FailedCreate")
def test_a_rejected_pod_template_is_reported_and_retried(operator: Operator, k: Kubectl) -> None:
    # Two jobs whose pods the API server refuses: one for good (no image: its template is
    # immutable, as a Job's, so it stays refused), one until its service account exists.
    no_image = busybox_template("true")
    del no_image["spec"]["containers"][0]["image"]
    k.create_pj("no-image", no_image, completions=1, parallelism=1)
    late_account = busybox_template("true")
    late_account["spec"]["serviceAccountName"] = "late"
    k.create_pj("late-account", late_account, completions=1, parallelism=1)

    cond = _creation_failed(k, "no-image")
    assert "spec.containers[0].image: Required value" in cond["message"]
    messages = wait_until(
        lambda: _events(k, "no-image", "FailedCreate"), timeout=30, what="an event"
    )
    assert messages[0].startswith("Error creating: ") and "Required value" in messages[0]
    assert 'serviceaccount "late" not found' in _creation_failed(k, "late-account")["message"]
    assert operator.running and k.pods("no-image") == k.pods("late-account") == []
    refused = k.patch_pj("no-image", {"spec": {"template": busybox_template("true")}}, check=False)
    assert refused.returncode != 0 and "field is immutable" in refused.stderr
    # Once the service account exists, the retry gets through.
    k.run("create", "serviceaccount", "late")
    wait_until(lambda: k.finished("late-account"), timeout=90, what="late-account done")
    assert k.finished("late-account") == "Complete"
    cleared = k.condition("late-account", "PodCreationFailed")
    assert cleared is not None and cleared["status"] == "False"
    assert k.finished("no-image") is None and k.pods("no-image") == []


def test_suspend_deletes_pods_without_failures_and_resume_restarts(
    operator: Operator, k: Kubectl
) -> None:
    name = "pausable"
    k.create_pj(
        name,
        busybox_template("sleep 4"),
        completions=2,
        parallelism=2,
        suspend=True,
        backoffLimit=0,
    )
    wait_until(lambda: k.row(name).status == "Suspended", timeout=30, what="Suspended")
    assert k.pods(name) == [] and "startTime" not in k.status(name)
    k.patch_pj(name, {"spec": {"suspend": False}})
    wait_until(lambda: sum(is_active(p) for p in k.pods(name)) == 2, timeout=30, what="2 pods")
    k.patch_pj(name, {"spec": {"suspend": True}})
    wait_until(lambda: k.row(name).status == "Suspended", timeout=30, what="Suspended again")
    wait_until(lambda: not any(is_active(p) for p in k.pods(name)), timeout=30, what="pods gone")
    assert k.status(name).get("failed", 0) == 0
    k.patch_pj(name, {"spec": {"suspend": False}})
    wait_until(lambda: k.finished(name), timeout=90, what=f"{name} done")
    status = k.status(name)
    assert k.finished(name) == "Complete" and (status["succeeded"], status["failed"]) == (2, 0)
    assert {"Suspended", "Resumed"} <= {
        e["reason"]
        for e in k.json("get", "events", "--field-selector", f"involvedObject.name={name}")["items"]
    }


def test_a_job_started_then_suspended_resumes_with_the_template_edited_meanwhile(
    operator: Operator, k: Kubectl
) -> None:
    """Kubernetes 1.36, as its e2e spec "should allow updating pod resources for a job
    that started and then was suspended", for a ParallelJob: once the suspended job's
    pods are gone, its status already says Suspended with no active pod and no
    startTime, so an edit of its resources, node selector and labels is accepted at
    once (no retry), and the pods created after the resume carry them."""
    name = "edited"
    template = busybox_template("sleep 300")
    template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "10m"}}
    k.create_pj(name, template, completions=4, parallelism=2)
    wait_until(
        lambda: sum(phase(p) == "Running" for p in k.pods(name)) == 2, timeout=60, what="2 running"
    )
    k.patch_pj(name, {"spec": {"suspend": True}})
    wait_until(lambda: k.pods(name) == [], timeout=60, what="the pods gone, finalizers and all")
    status = k.status(name)
    suspended = k.condition(name, "Suspended")
    assert suspended is not None and suspended["status"] == "True", status
    assert status.get("active", 0) == 0 and "startTime" not in status, status
    edit = {
        "metadata": {"labels": {"edited": "yes"}},
        "spec": {
            "nodeSelector": {"paralleljob.dev/node-type": "real"},
            "containers": [{**template["spec"]["containers"][0], "resources": NEW_REQUESTS}],
        },
    }
    k.patch_pj(name, {"spec": {"template": edit}})
    k.patch_pj(name, {"spec": {"suspend": False}})
    wait_until(
        lambda: sum(phase(p) == "Running" for p in k.pods(name)) == 2, timeout=60, what="resumed"
    )
    for pod in k.pods(name):
        assert pod["spec"]["containers"][0]["resources"] == NEW_REQUESTS
        assert pod["spec"]["nodeSelector"] == {"paralleljob.dev/node-type": "real"}
        assert pod["metadata"]["labels"]["edited"] == "yes"
    assert "startTime" in k.status(name)


NEW_REQUESTS = {"requests": {"cpu": "20m", "memory": "16Mi"}}


@pytest.mark.warnings("DeadlineExceeded")
def test_active_deadline_fails_the_job_and_deletes_its_pods(operator: Operator, k: Kubectl) -> None:
    name = "deadline"
    k.create_pj(
        name, busybox_template("sleep 60"), completions=2, parallelism=2, activeDeadlineSeconds=3
    )
    wait_until(lambda: k.finished(name), timeout=60, what=f"{name} to fail")
    cond = k.condition(name, "Failed")
    assert cond is not None and cond["reason"] == "DeadlineExceeded"
    assert cond["message"] == "Job was active longer than specified deadline"
    pods = k.pods(name)
    assert not any(is_active(p) for p in pods) and held(pods) == []
    assert k.status(name)["failed"] == 2
    assert k.row(name).status == "Failed"


def test_ttl_after_finished_deletes_the_job_and_its_pods(operator: Operator, k: Kubectl) -> None:
    name = "short-lived"
    k.create_pj(
        name, busybox_template("true"), completions=1, parallelism=1, ttlSecondsAfterFinished=2
    )

    def gone() -> bool:
        result = kubectl("-n", k.ns, "get", "pj", name, check=False)
        return result.returncode != 0 and "NotFound" in result.stderr

    wait_until(gone, timeout=90, what=f"{name} deleted by its TTL")
    wait_until(lambda: k.pods(name) == [], timeout=60, what="its pods deleted")


# The kubelet's BackOff: it restarts the crashed container in place, after a back-off.
@pytest.mark.warnings("BackoffLimitExceeded", "BackOff")
def test_on_failure_container_restarts_count_against_the_backoff_limit(
    operator: Operator, k: Kubectl, core_v1: Any
) -> None:
    """The kubelet restarts the container in place; its restarts count as failures, and
    past backoffLimit the job fails and its active pod is deleted (deleteActivePods),
    so whether the pod is still there at the end is a race: the watch counts the pods
    the job ever had."""
    name = "restarts"
    template = busybox_template("exit 1", restart_policy="OnFailure")
    with PodWatch(core_v1, k.ns, name) as watch:
        k.create_pj(name, template, completions=1, parallelism=1, backoffLimit=1)
        wait_until(lambda: k.finished(name), timeout=120, what=f"{name} to fail")
    cond = k.condition(name, "Failed")
    assert cond is not None and cond["reason"] == "BackoffLimitExceeded"
    assert len(watch.created) == 1, "OnFailure restarts in place: one pod"
    assert held(k.pods(name)) == []
    assert k.status(name)["failed"] == 1
    assert (
        json.dumps(k.status(name)["uncountedTerminatedPods"]) == '{"failed": [], "succeeded": []}'
    )


def test_unset_completions_and_parallelism_default_to_1_as_for_a_job(
    operator: Operator, k: Kubectl
) -> None:
    name = "defaults"
    k.create_pj(name, busybox_template("true"))
    wait_until(lambda: k.finished(name), timeout=60, what=f"{name} done")
    spec = k.pj(name)["spec"]
    assert (spec["completions"], spec["parallelism"]) == (1, 1)
    # backoffLimit is left unset and read as 6, as a Job's default (docs/api.md).
    assert "backoffLimit" not in spec
    assert spec["suspend"] is False
    row = k.row(name)
    assert (row.status, row.completions) == ("Complete", "1/1")
    # completions was defaulted, so it is now as immutable as a set one.
    refused = k.patch_pj(name, {"spec": {"completions": 2}}, check=False)
    assert refused.returncode != 0 and "immutable" in refused.stderr


@pytest.mark.parametrize("operator_settings", [{"PJ_LIVENESS_STALL_SECONDS": "3"}], indirect=True)
@pytest.mark.warnings("FailedCreate")
def test_liveness_probe_reports_progress_and_tolerates_retries(
    operator: Operator, k: Kubectl
) -> None:
    """/healthz runs the progress probe. With a 3 s threshold it stays healthy while one
    job retries a rejected pod create with back-off and another runs its pods: waits and
    retried failures are not stalls."""
    rejected = busybox_template("true")
    del rejected["spec"]["containers"][0]["image"]
    k.create_pj("no-image", rejected, completions=1, parallelism=1)
    k.create_pj("works", busybox_template("sleep 3"), completions=3, parallelism=1)
    counts: set[int] = set()  # kopf re-runs the probe at most every 10 s

    def healthy_until_done() -> str | None:
        code, body = operator.health()
        assert code == 200, body
        counts.add(body["progress"]["jobs"])
        return k.finished("works") if 2 in counts else None

    wait_until(healthy_until_done, timeout=120, what="works done, /healthz answering 200")
    assert k.condition("no-image", "PodCreationFailed") is not None
