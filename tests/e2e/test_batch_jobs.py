"""batch/v1 Jobs through the operator (PJ_MANAGE_JOBS, managed-by by default), on real
pods: a Job whose spec.managedBy names the operator is run by it exactly as the built-in
would run it (upstream's labels, annotations, hostname, owner reference), with the
operator's own tracking finalizer and Events; a Job that names no controller is left to
the built-in Job controller."""

from __future__ import annotations

from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.runtime.events import COMPONENT
from tests.support.wait import wait_until

from .conftest import Operator
from .support import Kubectl, busybox_template, parse_table

pytestmark = [pytest.mark.realnode]


def _job(k: Kubectl, name: str) -> dict[str, Any]:
    job: dict[str, Any] = k.json("get", "job", name)
    return job


def _condition(job: dict[str, Any], ctype: str) -> str | None:
    for cond in job.get("status", {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return str(cond.get("status"))
    return None


def _pods(k: Kubectl, name: str) -> list[dict[str, Any]]:
    selector = f"batch.kubernetes.io/job-name={name}"
    pods: list[dict[str, Any]] = k.json("get", "pods", "-l", selector)["items"]
    return pods


def _events(k: Kubectl, name: str) -> list[dict[str, Any]]:
    items = k.json("get", "events", "--field-selector", f"involvedObject.name={name}")["items"]
    return [e for e in items if e["involvedObject"].get("kind") == "Job"]


def _delete_and_wait_released(k: Kubectl, name: str) -> None:
    k.run("delete", "job", name, "--wait=false")

    def released() -> bool:
        return not any(
            c.TRACKING_FINALIZER in (p["metadata"].get("finalizers") or []) for p in _pods(k, name)
        )

    wait_until(released, timeout=60, what=f"{name}'s pods released")


def test_a_job_that_names_the_operator_is_run_by_it_as_upstream_runs_it(
    operator: Operator, k: Kubectl
) -> None:
    template = busybox_template("echo $JOB_COMPLETION_INDEX; hostname")
    k.create_job(
        "indexed", template, completions=3, parallelism=3, completionMode="Indexed",
        managedBy=c.MANAGED_BY,
    )  # fmt: skip

    def complete() -> dict[str, Any] | None:
        job = _job(k, "indexed")
        return job if _condition(job, "Complete") == "True" else None

    job = wait_until(complete, timeout=120, what="the Job Complete")
    status = job["status"]
    assert (status["succeeded"], status.get("failed", 0), status["completedIndexes"]) == (
        3,
        0,
        "0-2",
    )
    assert (
        status["ready"],
        status["terminating"],
        status.get("active", 0),
    ) == (0, 0, 0)
    assert _condition(job, "SuccessCriteriaMet") == "True", "upstream's interim condition first"
    assert not set(status) & {"statusText", "durationText", "selector", "podFailureBackoff"}

    pods = sorted(_pods(k, "indexed"), key=lambda p: p["metadata"]["name"])
    assert len(pods) == 3
    for index, pod in enumerate(pods):
        meta = pod["metadata"]
        assert meta["name"].startswith(f"indexed-{index}-")
        assert pod["spec"]["hostname"] == f"indexed-{index}"
        assert meta["labels"]["batch.kubernetes.io/job-completion-index"] == str(index)
        assert meta["annotations"]["batch.kubernetes.io/job-completion-index"] == str(index)
        [owner] = meta["ownerReferences"]
        assert (owner["apiVersion"], owner["kind"], owner["uid"]) == (
            "batch/v1", "Job", job["metadata"]["uid"],
        )  # fmt: skip
        assert c.JOB_TRACKING_FINALIZER not in (meta.get("finalizers") or [])
        logs = k.run("logs", meta["name"]).stdout.split()
        assert logs == [str(index), f"indexed-{index}"]

    reasons = {e["reason"] for e in _events(k, "indexed")}
    assert {"SuccessfulCreate", "Completed"} <= reasons
    sources = {e.get("source", {}).get("component") for e in _events(k, "indexed")}
    assert sources == {COMPONENT}, "only the operator reconciled it"

    [row] = parse_table(k.run("get", "job", "indexed").stdout)
    assert (row["STATUS"], row["COMPLETIONS"]) == ("Complete", "3/3")
    _delete_and_wait_released(k, "indexed")


def test_a_job_that_names_no_controller_is_left_to_the_built_in(
    operator: Operator, k: Kubectl
) -> None:
    k.create_job("builtin", busybox_template("true"), completions=1)

    def complete() -> dict[str, Any] | None:
        job = _job(k, "builtin")
        return job if _condition(job, "Complete") == "True" else None

    wait_until(complete, timeout=120, what="the built-in completes it")
    [pod] = _pods(k, "builtin")
    assert c.LABEL_CONTROLLER_UID not in pod["metadata"]["labels"], "not the operator's pod"
    sources = {e.get("source", {}).get("component") for e in _events(k, "builtin")}
    assert COMPONENT not in sources
