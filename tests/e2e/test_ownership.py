"""Pods belong to a job by owner reference, as ControllerRefManager.ClaimPods decides for
Jobs: a pod that stops matching is released, a matching orphan is adopted, a pod another
object controls is never touched (issue 9, part 2)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.wait import wait_until

from .conftest import Operator
from .support import FINALIZER, Kubectl, held, kwok_template

pytestmark = [pytest.mark.kwok]

UID_LABEL = "paralleljob.dev/controller-uid"


def _pod(k: Kubectl, name: str) -> dict[str, Any]:
    result: dict[str, Any] = k.json("get", "pod", name)
    return result


def _owner_uids(pod: dict[str, Any]) -> list[str]:
    return [ref["uid"] for ref in pod["metadata"].get("ownerReferences") or []]


def _extra_pod(k: Kubectl, name: str, job_uid: str, duration: str, **meta: Any) -> None:
    """A pod made by hand with the job's selector label (and ``meta``'s extras)."""
    template = kwok_template(duration)
    metadata = {
        "name": name,
        "labels": {UID_LABEL: job_uid},
        "annotations": template["metadata"]["annotations"],
        **meta,
    }
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}
    k.run("create", "-f", "-", input=json.dumps(body))


def test_a_pod_whose_label_is_removed_is_released_and_replaced_not_failed(
    operator: Operator, k: Kubectl
) -> None:
    k.create_pj("relabel", kwok_template("1h"), completions=2, parallelism=2)
    wait_until(lambda: len(held(k.pods("relabel"))) == 2, timeout=60, what="2 pods held")
    job_uid = k.pj("relabel")["metadata"]["uid"]
    victim = k.pods("relabel")[0]["metadata"]["name"]
    k.run("label", "pod", victim, f"{UID_LABEL}-")

    def released() -> bool:
        meta = _pod(k, victim)["metadata"]
        return FINALIZER not in (meta.get("finalizers") or []) and job_uid not in _owner_uids(
            _pod(k, victim)
        )

    wait_until(released, timeout=30, what="the unlabelled pod released")
    wait_until(
        lambda: k.status("relabel").get("active") == 2,
        timeout=30,
        what="a replacement pod: 2 active again",
    )
    assert k.status("relabel").get("failed", 0) == 0, "a released pod is not a failure"
    k.run("delete", "pod", victim, "--timeout=30s")  # nothing holds it any more


def test_a_matching_orphan_is_adopted_and_counted(operator: Operator, k: Kubectl) -> None:
    # Suspended, the job makes no pod of its own: the adoptee is all it has.
    k.create_pj("adopter", kwok_template("1h"), completions=2, parallelism=1, suspend=True)
    wait_until(lambda: k.condition("adopter", "Suspended"), timeout=30, what="suspended")
    job_uid = k.pj("adopter")["metadata"]["uid"]
    # It finishes unlabelled (a suspended job would delete it as an active pod), then
    # gets the job's label.
    _extra_pod(k, "adoptee", "not-yet", "0s")
    wait_until(
        lambda: (_pod(k, "adoptee").get("status") or {}).get("phase") == "Succeeded",
        timeout=60,
        what="the orphan succeeded",
    )
    k.run("label", "pod", "adoptee", "--overwrite", f"{UID_LABEL}={job_uid}")
    wait_until(
        lambda: job_uid in _owner_uids(_pod(k, "adoptee")),
        timeout=30,
        what="the orphan adopted (owner reference)",
    )
    wait_until(
        lambda: k.status("adopter").get("succeeded") == 1, timeout=60, what="the adoptee counted"
    )
    assert FINALIZER not in (_pod(k, "adoptee")["metadata"].get("finalizers") or [])


def test_a_pod_another_object_controls_is_never_touched(operator: Operator, k: Kubectl) -> None:
    k.create_pj("neighbour", kwok_template("1h"), completions=2, parallelism=1)
    wait_until(lambda: len(held(k.pods("neighbour"))) == 1, timeout=60, what="1 pod held")
    job_uid = k.pj("neighbour")["metadata"]["uid"]
    k.run("create", "configmap", "owner")
    owner = k.json("get", "configmap", "owner")["metadata"]
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["uid"]}
    _extra_pod(k, "foreign", job_uid, "1s", ownerReferences=[{**ref, "controller": True}])
    wait_until(
        lambda: (_pod(k, "foreign").get("status") or {}).get("phase") == "Succeeded",
        timeout=60,
        what="the foreign pod succeeded",
    )
    # The job's own pod keeps running; give the operator a sync's worth of its events.
    k.patch_pj("neighbour", {"spec": {"parallelism": 2}})
    wait_until(lambda: k.status("neighbour").get("active") == 2, timeout=30, what="2 active")
    foreign = _pod(k, "foreign")
    assert _owner_uids(foreign) == [owner["uid"]]
    assert FINALIZER not in (foreign["metadata"].get("finalizers") or [])
    assert k.status("neighbour").get("succeeded", 0) == 0, "not counted"
