"""spec.podStartDeadlineSeconds on the local cluster, with real pods that never start:
unschedulable ones (a nodeSelector no node has) and one whose image is never pulled.
Each is failed at its deadline (the phase Failed and the condition
paralleljob.dev/PodStartDeadlineExceeded), deleted, counted once as a failed pod and
replaced within backoffLimit; a podFailurePolicy rule on the condition fails the job at
once. Not a Job's behaviour: kubernetes/kubernetes#58384, #111948, #95431."""

from __future__ import annotations

import copy
import threading
from datetime import datetime
from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.runtime.events import COMPONENT
from tests.support.wait import wait_until

from .conftest import Operator
from .support import BUSYBOX, Kubectl, PodWatch, busybox_template, phase

TYPE = c.POD_COND_START_DEADLINE_EXCEEDED
REASON = c.REASON_POD_START_DEADLINE_EXCEEDED
DEADLINE = 5
#: The pod-failure back-off before a replacement, 1 s instead of 10 (a ParallelJob's own).
QUICK_BACKOFF = {"initialSeconds": 1, "maxSeconds": 1}


def unschedulable() -> dict[str, Any]:
    """A pod template no node takes: its nodeSelector matches no node."""
    template = busybox_template("true")
    template["spec"]["nodeSelector"] = {"paralleljob.dev/node-type": "none-such"}
    return template


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _condition(pod: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


class LastSeen:
    """Every pod of a job as a PodWatch last saw it before it went (DELETED events carry
    nothing newer than the last update), by uid; and why its containers ever waited."""

    def __init__(self) -> None:
        self.pods: dict[str, dict[str, Any]] = {}
        self.waited: set[str] = set()
        #: The init containers (sidecars included) ever seen running or finished.
        self.init_ran: set[str] = set()
        #: The pods (uids) ever seen Failed: a kubelet whose status write was already on
        #: its way may put Pending back over the operator's Failed (its status manager
        #: merges no terminal phase it did not compute), so the last version may not be.
        self.ever_failed: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, pods: dict[str, dict[str, Any]]) -> None:
        with self._lock:
            self.pods.update(copy.deepcopy(pods))
            for pod in pods.values():
                if phase(pod) == "Failed":
                    self.ever_failed.add(pod["metadata"]["uid"])
                for status in pod.get("status", {}).get("containerStatuses") or []:
                    waiting = status.get("state", {}).get("waiting") or {}
                    self.waited.add(str(waiting.get("reason", "")))
                for status in pod.get("status", {}).get("initContainerStatuses") or []:
                    if {"running", "terminated"} & set(status.get("state") or {}):
                        self.init_ran.add(str(status.get("name")))

    def all(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.pods.values())


def _warnings(k: Kubectl, name: str, reason: str) -> list[dict[str, Any]]:
    items = k.json("get", "events", "--field-selector", f"involvedObject.name={name}")["items"]
    return [e for e in items if e.get("reason") == reason]


def _assert_failed_by_its_deadline(
    seen: LastSeen, pod: dict[str, Any], deadline: int = DEADLINE
) -> dict[str, Any]:
    """The pod as last seen: failed (seen Failed), with the condition, written no sooner
    than its deadline (both times in whole seconds) and not long after it, then
    deleted."""
    name = pod["metadata"]["name"]
    assert pod["metadata"]["uid"] in seen.ever_failed, (name, pod["status"])
    assert pod["metadata"].get("deletionTimestamp"), f"{name} was not deleted"
    cond = _condition(pod, TYPE)
    assert cond is not None, (name, pod["status"])
    assert (cond["status"], cond["reason"]) == ("True", REASON)
    assert f"within podStartDeadlineSeconds ({deadline}s)" in cond["message"]
    waited = _time(cond["lastTransitionTime"]) - _time(pod["metadata"]["creationTimestamp"])
    assert deadline <= waited.total_seconds() <= deadline + 10, (name, waited)
    return cond


@pytest.mark.cluster
# The scheduler's FailedScheduling: no node matches the pods' nodeSelector.
@pytest.mark.warnings("FailedScheduling", "PodStartDeadlineExceeded", "BackoffLimitExceeded")
def test_pods_never_scheduled_are_failed_and_replaced_until_backoff_limit_exceeded(
    operator: Operator, k: Kubectl, core_v1: Any
) -> None:
    """backoffLimit 1: the first pod fails by its deadline and is replaced once; the
    replacement fails too and the job ends Failed with BackoffLimitExceeded."""
    name = "never-scheduled"
    seen = LastSeen()
    with PodWatch(core_v1, k.ns, name, check=seen) as watch:
        k.create_pj(
            name,
            unschedulable(),
            completions=1,
            parallelism=1,
            backoffLimit=1,
            podStartDeadlineSeconds=DEADLINE,
            podFailureBackoff=QUICK_BACKOFF,
        )
        wait_until(lambda: k.finished(name), timeout=120, what=f"{name} to fail")
        wait_until(lambda: k.pods(name) == [], timeout=60, what="the failed pods gone")
    assert watch.errors == []
    failed = k.condition(name, "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded", k.status(name)
    status = k.status(name)
    assert (status.get("failed"), status.get("succeeded", 0), status.get("active", 0)) == (2, 0, 0)
    assert status["uncountedTerminatedPods"] == {"succeeded": [], "failed": []}
    assert k.row(name).status == "Failed"
    assert len(watch.created) == 2, "the first pod replaced once"
    pods = seen.all()
    for pod in pods:
        _assert_failed_by_its_deadline(seen, pod)
        assert not pod["spec"].get("nodeName"), "never scheduled"
        # The status write merged the condition in: the scheduler's is still there.
        scheduled = _condition(pod, "PodScheduled")
        assert scheduled is not None and scheduled["reason"] == "Unschedulable"
    events = _warnings(k, name, REASON)
    assert len(events) == 2, events
    assert {e["type"] for e in events} == {"Warning"}
    assert {e.get("source", {}).get("component") for e in events} == {COMPONENT}
    assert sorted(e["message"].split()[1] for e in events) == sorted(
        p["metadata"]["name"] for p in pods
    )


@pytest.mark.cluster
@pytest.mark.warnings("FailedScheduling", "PodStartDeadlineExceeded", "PodFailurePolicy")
def test_a_fail_job_rule_on_the_condition_fails_the_job_at_once(
    operator: Operator, k: Kubectl, core_v1: Any
) -> None:
    """podFailurePolicy: FailJob onPodConditions paralleljob.dev/PodStartDeadlineExceeded.
    The first pod failed by its deadline fails the job (reason PodFailurePolicy), with
    backoffLimit left to spare and no replacement."""
    name = "fail-fast"
    policy = {"rules": [{"action": "FailJob", "onPodConditions": [{"type": TYPE}]}]}
    seen = LastSeen()
    with PodWatch(core_v1, k.ns, name, check=seen) as watch:
        k.create_pj(
            name,
            unschedulable(),
            completions=1,
            parallelism=1,
            backoffLimit=6,
            podStartDeadlineSeconds=DEADLINE,
            podFailurePolicy=policy,
        )
        wait_until(lambda: k.finished(name), timeout=60, what=f"{name} to fail")
        wait_until(lambda: k.pods(name) == [], timeout=60, what="the failed pod gone")
    assert watch.errors == []
    assert len(watch.created) == 1, "no replacement"
    [pod] = seen.all()
    cond = _assert_failed_by_its_deadline(seen, pod)
    failed = k.condition(name, "Failed")
    assert failed is not None, k.status(name)
    assert failed["reason"] == "PodFailurePolicy"
    pod_name = pod["metadata"]["name"]
    assert failed["message"] == (
        f"Pod {k.ns}/{pod_name} has condition {TYPE} matching FailJob rule at index 0"
    )
    # At once: within a few seconds of the pod's failure, not after a back-off or a GC.
    late = _time(failed["lastTransitionTime"]) - _time(cond["lastTransitionTime"])
    assert late.total_seconds() <= 5, late
    assert k.status(name)["failed"] == 1
    assert k.pj(name)["spec"]["podReplacementPolicy"] == "Failed"
    assert len(_warnings(k, name, REASON)) == 1


#: What runs before the main container: nothing; an init container that succeeds; a
#: native sidecar (an init container with restartPolicy Always, as meshes inject). Those
#: two get a deadline they run well within, so the pod is judged after they ran.
BEFORE_MAIN: dict[str, tuple[dict[str, Any] | None, int]] = {
    "alone": (None, DEADLINE),
    "after an init container": ({"name": "init", "command": ["true"]}, 15),
    "beside a native sidecar": (
        {"name": "sidecar", "command": ["sleep", "3600"], "restartPolicy": "Always"},
        15,
    ),
}


@pytest.mark.realnode
# The kubelet's Failed (ErrImagePull) and BackOff (ImagePullBackOff) on the pod.
@pytest.mark.warnings("Failed", "BackOff", "PodStartDeadlineExceeded", "BackoffLimitExceeded")
@pytest.mark.parametrize("before", list(BEFORE_MAIN))
def test_a_pod_whose_image_is_never_pulled_is_failed_on_its_node(
    operator: Operator, k: Kubectl, core_v1: Any, before: str
) -> None:
    """Scheduled to the real node, its container waits on an image no registry has
    (ErrImagePull, ImagePullBackOff): failed by the operator, the kubelet keeps it Failed
    and tears it down, and the job fails at backoffLimit 0. An init container that ran,
    or a sidecar that runs, does not make the pod started."""
    name = "never-pulled"
    template = busybox_template("true")
    template["spec"]["nodeSelector"] = {"paralleljob.dev/node-type": "real"}
    container = template["spec"]["containers"][0]
    container["image"] = "registry.invalid/paralleljob/never-pulled:1"
    container["imagePullPolicy"] = "Always"
    init, deadline = BEFORE_MAIN[before]
    if init is not None:
        template["spec"]["initContainers"] = [
            {"image": BUSYBOX, "imagePullPolicy": "IfNotPresent", **init}
        ]
    seen = LastSeen()
    with PodWatch(core_v1, k.ns, name, check=seen) as watch:
        k.create_pj(
            name,
            template,
            completions=1,
            parallelism=1,
            backoffLimit=0,
            podStartDeadlineSeconds=deadline,
        )
        wait_until(lambda: k.finished(name), timeout=90, what=f"{name} to fail")
        wait_until(lambda: k.pods(name) == [], timeout=90, what="the pod torn down and gone")
    assert watch.errors == []
    [pod] = seen.all()
    _assert_failed_by_its_deadline(seen, pod, deadline)
    assert seen.init_ran == ({init["name"]} if init else set()), "judged after it ran"
    assert pod["spec"].get("nodeName"), "scheduled: the kubelet had it"
    if init is None:
        assert {"ErrImagePull", "ImagePullBackOff"} & seen.waited, seen.waited
    else:  # on a busy node the deadline may come while the kubelet still prepares it
        assert seen.waited <= {
            "PodInitializing",
            "ContainerCreating",
            "ErrImagePull",
            "ImagePullBackOff",
            "",
        }, seen.waited
    statuses = pod["status"].get("containerStatuses") or []
    assert statuses and "running" not in statuses[0].get("state", {}), statuses
    failed = k.condition(name, "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded"
    assert k.status(name)["failed"] == 1
    assert len(_warnings(k, name, REASON)) == 1


@pytest.mark.cluster
def test_the_field_is_validated_and_may_change(crd: None, k: Kubectl) -> None:
    """At least 1, with the schema's message; changeable on an existing job (suspended
    here, so that no operator is needed)."""
    name = "validated"
    k.create_pj(name, unschedulable(), suspend=True, podStartDeadlineSeconds=30)
    assert k.pj(name)["spec"]["podStartDeadlineSeconds"] == 30
    k.patch_pj(name, {"spec": {"podStartDeadlineSeconds": 120}})
    assert k.pj(name)["spec"]["podStartDeadlineSeconds"] == 120
    k.patch_pj(name, {"spec": {"podStartDeadlineSeconds": None}})
    assert "podStartDeadlineSeconds" not in k.pj(name)["spec"]
    refused = k.patch_pj(name, {"spec": {"podStartDeadlineSeconds": 0}}, check=False)
    assert refused.returncode != 0
    assert (
        "spec.podStartDeadlineSeconds: Invalid value: 0: spec.podStartDeadlineSeconds in body "
        "should be greater than or equal to 1"
    ) in refused.stderr
