"""Bad input the API server cannot refuse up front, case by case: a pod template only pod
validation refuses, a quota that forbids pods, a namespace deleted under a running job,
jobs deleted while their first sync runs. Each time the operator logs no traceback and
goes on serving the other jobs. The bugs this found (a pod leaked by a job deleted
mid-sync, int32 fields unbounded, a TTL overflowing a date, template metadata of the
wrong type) are fixed; their tests stay."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Operator, operator_env, running
from tests.e2e.support import Kubectl, held, kubectl, kwok_template
from tests.support.wait import ConditionTimeout, wait_until

from .conftest import new_namespace
from .inputs import Json, job_body
from .support import (
    JobApi,
    OperatorLog,
    assert_no_traceback,
    check_refusal,
    events,
    held_pods,
    settle,
)

pytestmark = [pytest.mark.fuzz, pytest.mark.cluster, pytest.mark.kwok]


def _creation_failed(k: Kubectl, name: str) -> dict[str, Any]:
    def reported() -> dict[str, Any] | None:
        cond = k.condition(name, "PodCreationFailed")
        return cond if cond and cond.get("status") == "True" else None

    return wait_until(reported, timeout=30, what=f"PodCreationFailed on {name}")


def _completes(k: Kubectl, name: str, timeout: float = 60) -> None:
    wait_until(lambda: k.finished(name), timeout=timeout, what=f"{name} done")
    assert k.finished(name) == "Complete", k.status(name)


def _bad_container_name(template: Json) -> None:
    template["spec"]["containers"][0]["name"] = "Main_Container"


def _negative_cpu_request(template: Json) -> None:
    template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "-1"}}


@pytest.mark.parametrize(
    ("spoil", "field"),
    [
        (_bad_container_name, "spec.containers[0].name"),
        (_negative_cpu_request, "spec.containers[0].resources.requests[cpu]"),
    ],
    ids=["invalid-container-name", "negative-cpu-request"],
)
def test_a_template_only_pod_validation_refuses_reports_pod_creation_failed(
    operator: Operator,
    k: Kubectl,
    core_v1: Any,
    spoil: Callable[[Json], None],
    field: str,
) -> None:
    """The CRD keeps the pod spec as it is, so the API accepts the job; its pods are
    refused: PodCreationFailed and a FailedCreate Event name the field, and a healthy
    job beside it completes."""
    template = kwok_template("0s")
    spoil(template)
    k.create_pj("refused-pods", template, completions=2, parallelism=2)
    k.create_pj("healthy", kwok_template("0s"), completions=3, parallelism=3)
    cond = _creation_failed(k, "refused-pods")
    assert cond["reason"] == "FailedCreate" and field in cond["message"], cond
    messages = wait_until(
        lambda: events(core_v1, k.ns, "refused-pods", "FailedCreate"),
        timeout=30,
        what="a FailedCreate event",
    )
    assert messages[0].startswith("Error creating: ") and field in messages[0], messages
    _completes(k, "healthy")
    assert k.pods("refused-pods") == [] and k.finished("refused-pods") is None
    assert_no_traceback(operator)


def test_a_quota_that_forbids_pods_reports_it_until_removed(
    operator: Operator, k: Kubectl, core_v1: Any
) -> None:
    k.run("create", "quota", "no-pods", "--hard=pods=0")
    # Until the quota controller has computed its usage, admission refuses for another
    # reason ("status unknown for quota"); wait, so that the message is the quota's.
    wait_until(
        lambda: (k.json("get", "quota", "no-pods").get("status") or {}).get("used"),
        timeout=30,
        what="the quota's usage computed",
    )
    k.create_pj("quota-bound", kwok_template("0s"), completions=2, parallelism=2)
    cond = _creation_failed(k, "quota-bound")
    assert "exceeded quota: no-pods" in cond["message"], cond
    messages = wait_until(
        lambda: events(core_v1, k.ns, "quota-bound", "FailedCreate"),
        timeout=30,
        what="a FailedCreate event",
    )
    assert "exceeded quota: no-pods" in messages[0], messages
    k.run("delete", "quota", "no-pods")
    # Retried with back-off (1 s doubling): a few seconds of refusals wait at most ~16 s.
    _completes(k, "quota-bound", timeout=90)
    cleared = k.condition("quota-bound", "PodCreationFailed")
    assert cleared is not None and cleared["status"] == "False", cleared
    assert_no_traceback(operator)


@pytest.fixture
def second_namespace(kubeconfig: str) -> Iterator[str]:
    with new_namespace() as name:
        yield name


@pytest.fixture
def operator_of_two(
    request: pytest.FixtureRequest,
    crd: None,
    namespace: str,
    second_namespace: str,
    tmp_path: Path,
    operator_settings: dict[str, str],
) -> Iterator[Operator]:
    """One operator watching the test's namespace and a second one.

    Operator passes ``--namespace NS``; the CLI drops an empty NS and then watches the
    comma-separated $PJ_WATCH_NAMESPACES: both namespaces in one process."""
    watched = f"{namespace},{second_namespace}"
    op = Operator("", tmp_path, operator_env(**operator_settings, PJ_WATCH_NAMESPACES=watched))
    yield from running(op, namespace, request)


def test_a_namespace_deleted_under_a_running_job(
    operator_of_two: Operator, k: Kubectl, second_namespace: str
) -> None:
    """The namespace goes (its job's pods released by the operator), and the operator
    goes on serving the namespace left."""
    doomed = Kubectl(second_namespace)
    doomed.create_pj("running", kwok_template("1h"), completions=3, parallelism=3)
    wait_until(lambda: len(held(doomed.pods("running"))) == 3, timeout=60, what="3 pods held")
    kubectl("delete", "namespace", second_namespace, "--wait=false")

    def namespace_gone() -> bool:
        result = kubectl("get", "namespace", second_namespace, check=False)
        return result.returncode != 0 and "NotFound" in result.stderr

    wait_until(namespace_gone, timeout=120, what=f"namespace {second_namespace} deleted")
    k.create_pj("after", kwok_template("0s"), completions=2, parallelism=2)
    _completes(k, "after")
    assert_no_traceback(operator_of_two)
    # Replacements refused for the terminating namespace are no error and not retried
    # (upstream's manageJob): no warning, no retry storm until the namespace is gone. (A
    # creation that finds the namespace already gone, 404, is an error upstream too.)
    log = operator_of_two.log_path.read_text(errors="replace").splitlines()
    refused = [
        line
        for line in log
        if f"{second_namespace}/running: pod creation failed" in line and "being terminated" in line
    ]
    assert refused == [], "\n".join(refused[:3])


def _first_pod(k: Kubectl, name: str) -> None:
    wait_until(lambda: k.pods(name), timeout=30, what=f"a pod of {name}")


#: Background deletes the pods after the job, Foreground before it (the job waits for
#: its pods, which wait for the operator to release them), Orphan keeps them ownerless.
PROPAGATIONS = ("Background", "Foreground", "Orphan")


RELEASE = '[{"op": "remove", "path": "/metadata/finalizers"}]'


def _release_by_hand(k: Kubectl, pods: list[str]) -> None:
    """What the operator should have done, so that the namespace can be deleted."""
    for pod in pods:
        k.run("patch", "pod", pod, "--type=json", "-p", RELEASE, check=False)


def test_jobs_deleted_mid_sync_leave_no_tracking_finalizer(
    operator: Operator, k: Kubectl, jobs: JobApi
) -> None:
    """20 jobs, each deleted right after its creation: half before the operator has
    created a pod, half once the first pod exists (during the slow start)."""
    for i in range(20):
        name = f"doomed-{i}"
        spec = {"completions": 5, "parallelism": 5, "template": kwok_template("1h")}
        created = jobs.create(job_body(name, spec))
        assert created.accepted, created.message
        if i % 2:
            _first_pod(k, name)
        jobs.delete(name, propagation=PROPAGATIONS[i % len(PROPAGATIONS)])

    def all_gone_and_released() -> bool:
        owned = [p for p in k.json("get", "pods")["items"] if p["metadata"].get("ownerReferences")]
        return not k.json("get", "pj")["items"] and not owned and held_pods(k) == []

    # Releases take a second or two; a pod still held after 30 s is held for good.
    leaked: list[str] = []
    try:
        wait_until(all_gone_and_released, timeout=30, what="jobs gone, their pods released")
    except ConditionTimeout:
        leaked = held_pods(k)
        _release_by_hand(k, leaked)
        wait_until(all_gone_and_released, timeout=30, what="jobs gone once released by hand")
    k.create_pj("after", kwok_template("0s"), completions=2, parallelism=2)
    _completes(k, "after")
    assert_no_traceback(operator)
    assert leaked == [], f"pods left with the tracking finalizer: {leaked}"


# ------------------------------------------------- the bugs this found, fixed since
@pytest.mark.parametrize(
    "field", ["completions", "parallelism", "backoffLimit", "ttlSecondsAfterFinished"]
)
def test_int32_fields_refuse_values_beyond_int32(jobs: JobApi, field: str) -> None:
    """`format: int32` bounds nothing in a CRD: the schema's maximum does, as a Job's."""
    spec = {"completions": 1, field: 2**31, "template": kwok_template("0s")}
    answer = jobs.create(job_body("beyond-int32", spec), dry_run=True)
    check_refusal(answer, [f"spec.{field}"], f"{field} 2^31")


def test_a_ttl_beyond_the_calendar_is_refused_or_harmless(operator: Operator, jobs: JobApi) -> None:
    spec = {"completions": 1, "ttlSecondsAfterFinished": 2**40, "template": kwok_template("0s")}
    answer = jobs.create(job_body("far-ttl", spec))
    if not answer.accepted:
        check_refusal(answer, ["spec.ttlSecondsAfterFinished"], "ttlSecondsAfterFinished 2^40")
        return
    log = OperatorLog(operator)
    assert settle(jobs, "far-ttl", answer.obj["spec"], log=log) == "Complete"
    assert_no_traceback(operator)


@pytest.mark.parametrize(
    ("key", "value"),
    [("labels", ["x"]), ("annotations", "x"), ("finalizers", 5)],
    ids=["labels-list", "annotations-string", "finalizers-number"],
)
def test_template_metadata_of_the_wrong_type_is_refused_or_reported(
    operator: Operator, jobs: JobApi, key: str, value: Json
) -> None:
    template = kwok_template("0s")
    template["metadata"][key] = value
    answer = jobs.create(job_body("bad-metadata", {"completions": 1, "template": template}))
    if not answer.accepted:
        check_refusal(answer, [f"spec.template.metadata.{key}"], f"metadata.{key} {value!r}")
        return
    pod_refused = (f"metadata.{key}",)
    log = OperatorLog(operator)
    settle(jobs, "bad-metadata", answer.obj["spec"], pod_refused, log)
    assert_no_traceback(operator)
