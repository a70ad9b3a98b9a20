"""The two kinds of job (kind.py): a batch/v1 Job gets pods whose labels, annotations,
finalizer, owner reference and downward-API env are upstream's, reads them back, is
reconciled or not by its spec.managedBy, and is synced by the same shell with a status
that holds only batch/v1's fields."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.config import ControllerConfig
from paralleljob.core.job.kind import PARALLELJOB, WATCH_LABEL, batch_job, kind_of_pod
from paralleljob.core.job.model import JobStatus, parse_job, parse_pod
from paralleljob.core.job.pods import new_pod_bodies
from paralleljob.core.job.sync import PodPlan
from paralleljob.jobs.controller import Controller
from paralleljob.jobs.job_runtime import JobRuntime
from tests.unit.fake_api import FakeApi, FakeRecorder

JOB = batch_job(take_unmanaged=False)
ALL_JOBS = batch_job(take_unmanaged=True)


def _job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u-1", "resourceVersion": "3"},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}},
            **spec,
        },
    }


def test_a_job_s_pod_carries_upstream_s_keys_and_the_watch_label() -> None:
    body = _job(completionMode="Indexed", managedBy=c.MANAGED_BY)
    [pod] = new_pod_bodies(body, parse_job(body), PodPlan(create=1, create_indexes=(1,)), JOB)
    meta = pod["metadata"]
    assert meta["generateName"] == "j-1-"
    assert pod["spec"]["hostname"] == "j-1"
    assert meta["labels"] == {
        "batch.kubernetes.io/job-completion-index": "1",
        "batch.kubernetes.io/job-name": "j",
        "batch.kubernetes.io/controller-uid": "u-1",
        WATCH_LABEL: "u-1",
    }
    assert meta["annotations"] == {"batch.kubernetes.io/job-completion-index": "1"}
    assert meta["finalizers"] == [c.TRACKING_FINALIZER], "not the built-in's (KEP-4368)"
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "j",
            "uid": "u-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    [env] = pod["spec"]["containers"][0]["env"]
    path = env["valueFrom"]["fieldRef"]["fieldPath"]
    assert path == "metadata.labels['batch.kubernetes.io/job-completion-index']"


@pytest.mark.parametrize(
    ("managed_by", "finalizer"),
    [
        (c.MANAGED_BY, c.TRACKING_FINALIZER),
        (None, c.JOB_TRACKING_FINALIZER),
        (c.BUILTIN_JOB_CONTROLLER, c.JOB_TRACKING_FINALIZER),
    ],
)
def test_a_job_the_operator_runs_for_the_built_in_keeps_the_built_in_s_finalizer(
    managed_by: str | None, finalizer: str
) -> None:
    spec = {} if managed_by is None else {"managedBy": managed_by}
    assert ALL_JOBS.pod_finalizer(spec) == finalizer
    assert PARALLELJOB.pod_finalizer(spec) == c.TRACKING_FINALIZER


@pytest.mark.parametrize(
    ("managed_by", "managed_by_mode", "all_mode", "paralleljob"),
    [
        (c.MANAGED_BY, True, True, True),
        (None, False, True, True),
        (c.BUILTIN_JOB_CONTROLLER, False, True, False),
        ("kueue.x-k8s.io/multikueue", False, False, False),
    ],
)
def test_which_jobs_each_kind_reconciles(
    managed_by: str | None, managed_by_mode: bool, all_mode: bool, paralleljob: bool
) -> None:
    spec = {} if managed_by is None else {"managedBy": managed_by}
    assert JOB.reconciles(spec) is managed_by_mode
    assert ALL_JOBS.reconciles(spec) is all_mode
    assert PARALLELJOB.reconciles(spec) is paralleljob


@pytest.mark.parametrize("finalizer", [c.TRACKING_FINALIZER, c.JOB_TRACKING_FINALIZER])
def test_a_job_s_pod_is_tracked_by_either_finalizer(finalizer: str) -> None:
    body = _job()
    pod = next(new_pod_bodies(body, parse_job(body), PodPlan(create=1), JOB))
    pod["metadata"].update(name="j-x", uid="p-1", finalizers=[finalizer])
    info = parse_pod(pod, JOB)
    assert (info.has_finalizer, info.label_uid, info.controller_uid) == (True, "u-1", "u-1")
    assert parse_pod(pod, PARALLELJOB).has_finalizer is (finalizer == c.TRACKING_FINALIZER)


def _meta(labels: dict[str, str], owner_kind: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"labels": labels}
    if owner_kind is not None:
        api_version = "batch/v1" if owner_kind == "Job" else c.API_VERSION
        meta["ownerReferences"] = [
            {"apiVersion": api_version, "kind": owner_kind, "uid": "u", "controller": True}
        ]
    return meta


@pytest.mark.parametrize(
    ("meta", "want"),
    [
        pytest.param(_meta({WATCH_LABEL: "u"}, "ParallelJob"), "ParallelJob", id="ParallelJob"),
        pytest.param(
            _meta({WATCH_LABEL: "u", JOB.controller_uid_label: "u"}, "Job"), "Job", id="Job"
        ),
        pytest.param(_meta({JOB.controller_uid_label: "u"}), "Job", id="built-in's orphan"),
        pytest.param(
            _meta({WATCH_LABEL: "u", JOB.controller_uid_label: "u"}), "Job", id="operator's orphan"
        ),
        pytest.param(_meta({WATCH_LABEL: "u"}), "ParallelJob", id="ParallelJob's orphan"),
        pytest.param(_meta({"app": "x"}, "ReplicaSet"), None, id="another controller's"),
    ],
)
def test_the_kind_of_a_pod(meta: dict[str, Any], want: str | None) -> None:
    kind = kind_of_pod(meta, (JOB, PARALLELJOB))
    assert (kind.kind if kind else None) == want


def test_a_kind_names_its_api_paths_and_selector() -> None:
    assert JOB.path("ns", "j", "status") == "/apis/batch/v1/namespaces/ns/jobs/j/status"
    assert PARALLELJOB.path("ns") == "/apis/paralleljob.dev/v1alpha1/namespaces/ns/paralleljobs"
    assert PARALLELJOB.selector("u-1") == "paralleljob.dev/controller-uid=u-1"


def test_a_job_s_status_holds_only_batch_v1_s_fields() -> None:
    status = JobStatus(failures_since_success=2, status_text="Running", selector="x=y")
    assert JOB.status_json(status) == {
        "conditions": [],
        "startTime": None,
        "completionTime": None,
        "active": 0,
        "ready": 0,
        "terminating": 0,
        "succeeded": 0,
        "failed": 0,
        "uncountedTerminatedPods": {"succeeded": [], "failed": []},
        "completedIndexes": None,
        "failedIndexes": None,
    }
    assert JOB.stored_status(status) == JobStatus()
    assert (JOB.stores_backoff, PARALLELJOB.stores_backoff) == (False, True)


def _sync(controller: Controller, rt: JobRuntime) -> None:
    asyncio.run(controller.syncer.sync(rt))


def test_the_shell_syncs_a_job_with_batch_v1_s_status_and_no_duration_refresh() -> None:
    """The same controller, the Job kind: its pods get upstream's keys, its status only
    batch/v1's fields, and nothing is written for DURATION."""
    api = FakeApi(_job(managedBy=c.MANAGED_BY), kind=JOB)
    config = ControllerConfig(sync_batch_seconds=0.0, status_batch_seconds=0.0)
    controller = Controller(api, FakeRecorder(), config, api.pods_of, kind=JOB)
    rt = JobRuntime(api.job, kind=JOB)
    report = asyncio.run(controller.syncer.sync(rt))
    created = [call.body for call in api.calls if call.method == "create_pod"]
    assert len(created) == 2
    assert all(
        body and body["metadata"]["finalizers"] == [c.TRACKING_FINALIZER] for body in created
    )
    status = api.job["status"]
    assert (status["active"], status["ready"], status["terminating"]) == (2, 0, 0)
    assert set(status) <= set(JOB.status_json(JobStatus())) | {"startTime"}
    assert report.delay is None, "no DURATION refresh to wait for"
    writes = len([call for call in api.calls if call.method == "patch_job_status"])
    _sync(controller, rt)
    assert len([call for call in api.calls if call.method == "patch_job_status"]) == writes


def test_a_job_s_pod_failure_back_off_is_kept_in_memory() -> None:
    """batch/v1 JobStatus has no place for the back-off: the runtime keeps it, as
    upstream's backoffRecordStore does, so that the second failure waits longer."""
    rt = JobRuntime(_job(), kind=JOB)
    rt.written(JobStatus(failures_since_success=2))
    assert rt.job.status.failures_since_success == 2
    rt.body = {**rt.body, "status": {"failed": 2}}
    assert (rt.job.status.failed, rt.job.status.failures_since_success) == (2, 2)
    paralleljob = JobRuntime(_job())
    paralleljob.written(JobStatus(failures_since_success=2))
    assert paralleljob.job.status.failures_since_success == 0, "a ParallelJob's is its status"
