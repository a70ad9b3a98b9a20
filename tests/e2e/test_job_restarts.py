"""spec.restartPolicy on the local cluster, with real pods: a ParallelJob that fails
starts again from nothing, its new pods labelled with the attempt, its counts reset,
status.restarts one more and a Warning Event Restarted each time, until maxRestarts.
Not a Job's behaviour: kubernetes/kubernetes#77396, jobset#1129."""

from __future__ import annotations

import json
from typing import Any

import pytest

from paralleljob.core.job.job_restart_policy import ATTEMPT_LABEL
from tests.support.wait import wait_until

from .conftest import Operator
from .support import Kubectl, PodWatch, busybox_template

#: The pod-failure back-off before a replacement, 1 s instead of 10 (a ParallelJob's own).
QUICK_BACKOFF = {"initialSeconds": 1, "maxSeconds": 1}


def _restarted(k: Kubectl, name: str) -> list[str]:
    items = k.json("get", "events", "--field-selector", f"involvedObject.name={name}")["items"]
    return [str(e["message"]) for e in items if e.get("reason") == "Restarted"]


def _attempt(pod: dict[str, Any]) -> int:
    return int((pod["metadata"].get("labels") or {}).get(ATTEMPT_LABEL, "0"))


def _attempt_aware() -> dict[str, Any]:
    """A pod that fails on the job's first attempt and succeeds on any later one: it reads
    its attempt label through the downward API (empty on the first attempt's pods)."""
    template = busybox_template('[ -n "$ATTEMPT" ]')
    template["spec"]["containers"][0]["env"] = [
        {
            "name": "ATTEMPT",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{ATTEMPT_LABEL}']"}},
        }
    ]
    return template


@pytest.mark.realnode
@pytest.mark.warnings("Restarted", "BackoffLimitExceeded")
def test_a_failing_job_restarts_until_max_restarts_then_fails(
    operator: Operator, k: Kubectl, core_v1: Any
) -> None:
    name = "always-fails"
    with PodWatch(core_v1, k.ns, name) as watch:
        k.create_pj(
            name,
            busybox_template("exit 3"),
            completions=1,
            parallelism=1,
            backoffLimit=0,
            podFailureBackoff=QUICK_BACKOFF,
            restartPolicy={"maxRestarts": 2},
        )
        wait_until(lambda: k.finished(name), timeout=180, what=f"{name} to fail")
    assert watch.errors == []
    failed = k.condition(name, "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded", k.status(name)
    status = k.status(name)
    assert (status.get("restarts"), status.get("failed"), status.get("succeeded", 0)) == (
        2,
        1,
        0,
    ), "the last attempt's count, its pod counted once"
    assert len(watch.created) == 3, "one pod per attempt"
    pods = k.pods(name)
    assert sorted(_attempt(p) for p in pods) == [0, 1, 2], "the earlier attempts' pods stay"
    assert all(p["status"]["phase"] == "Failed" for p in pods)
    restarted = wait_until(
        lambda: (lambda m: m if len(m) == 2 else None)(_restarted(k, name)),
        timeout=30,
        what="two Restarted Events",
    )
    assert sorted(m.split("restart ")[-1] for m in restarted) == ["1 of 2", "2 of 2"]
    assert all("BackoffLimitExceeded" in m for m in restarted)


@pytest.mark.realnode
# The first attempt fails (BackoffLimitExceeded) and is restarted, not failed: no Event of its own.
@pytest.mark.warnings("Restarted")
def test_a_restarted_job_completes_with_the_counts_of_its_own_attempt(
    operator: Operator, k: Kubectl
) -> None:
    name = "second-time-lucky"
    k.create_pj(
        name,
        _attempt_aware(),
        completions=2,
        parallelism=2,
        backoffLimit=0,
        podFailureBackoff=QUICK_BACKOFF,
        restartPolicy={"maxRestarts": 3, "onFailureReasons": ["BackoffLimitExceeded"]},
    )
    wait_until(lambda: k.finished(name), timeout=180, what=f"{name} to finish")
    assert k.finished(name) == "Complete", k.status(name)
    status = k.status(name)
    assert (status.get("restarts"), status.get("succeeded"), status.get("failed", 0)) == (1, 2, 0)
    assert k.row(name).status == "Complete"
    by_attempt = sorted((_attempt(p), p["status"]["phase"]) for p in k.pods(name))
    # The first attempt: a pod failed (the verdict), the other failed or was deleted.
    assert [phase for attempt, phase in by_attempt if attempt == 1] == ["Succeeded"] * 2
    assert all(phase == "Failed" for attempt, phase in by_attempt if attempt == 0)


@pytest.mark.cluster
def test_the_policy_is_validated(crd: None, k: Kubectl) -> None:
    name = "validated"
    k.create_pj(name, busybox_template("true"), suspend=True, restartPolicy={"maxRestarts": 1})
    cases = [
        (
            {"maxRestarts": 0},
            "spec.restartPolicy.maxRestarts: Invalid value: 0: "
            "spec.restartPolicy.maxRestarts in body should be greater than or equal to 1",
        ),
        ({"maxRestarts": None}, "spec.restartPolicy.maxRestarts: Required value"),
        (
            {"maxRestarts": 1, "onFailureReasons": ["Complete"]},
            'spec.restartPolicy.onFailureReasons[0]: Unsupported value: "Complete": '
            'supported values: "BackoffLimitExceeded", "DeadlineExceeded", "PodFailurePolicy", '
            '"MaxFailedIndexesExceeded", "FailedIndexes"',
        ),
        (
            {"maxRestarts": 1, "onFailureReasons": ["DeadlineExceeded", "DeadlineExceeded"]},
            'spec.restartPolicy.onFailureReasons[1]: Duplicate value: "DeadlineExceeded"',
        ),
    ]
    for policy, message in cases:
        refused = k.patch_pj(name, {"spec": {"restartPolicy": policy}}, check=False)
        assert refused.returncode != 0, policy
        assert message in refused.stderr, (policy, refused.stderr)


@pytest.mark.cluster
def test_the_attempt_label_is_refused_in_the_template(crd: None, k: Kubectl) -> None:
    """The label is the operator's: the API server refuses a ParallelJob whose template
    carries it, and says why (a first attempt's pods would count as attempt N)."""
    template = busybox_template("true")
    template["metadata"] = {"labels": {ATTEMPT_LABEL: "1"}}
    body = {
        "apiVersion": "paralleljob.dev/v1alpha1",
        "kind": "ParallelJob",
        "metadata": {"name": "reserved-label"},
        "spec": {"completions": 1, "template": template},
    }
    refused = k.run("create", "-f", "-", input=json.dumps(body), check=False)
    assert refused.returncode != 0
    assert (
        "spec.template.metadata.labels: Forbidden: the label paralleljob.dev/restart-attempt "
        "is reserved: the operator labels the pods of each restart attempt "
        "(spec.restartPolicy) with it"
    ) in refused.stderr, refused.stderr
