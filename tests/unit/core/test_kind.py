"""The seam for a second kind of job (kind.py): a fake kind, shaped like batch/v1 Job,
gets pods whose labels, annotations, finalizer, owner reference and downward-API env
are its own, reads them back, and is synced by the shell unchanged."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from paralleljob.config import ControllerConfig
from paralleljob.core.kind import PARALLELJOB, JobKind
from paralleljob.core.model import parse_job, parse_pod
from paralleljob.core.pods import new_pod_bodies
from paralleljob.core.sync import PodPlan
from paralleljob.shell.controller import Controller
from paralleljob.shell.runtime import JobRuntime

from ..fake_api import FakeApi, FakeRecorder

SECOND = JobKind(
    group="batch",
    version="v1",
    plural="jobs",
    kind="Job",
    key_prefix="batch.example.com",
    finalizer="batch.example.com/job-tracking",
    spec_defaults=lambda spec: None,
    refresh_duration=False,
)


def _job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": SECOND.api_version,
        "kind": SECOND.kind,
        "metadata": {"name": "j", "namespace": "ns", "uid": "u-1", "resourceVersion": "3"},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}},
            **spec,
        },
    }


def test_a_second_kind_s_pod_carries_its_own_keys() -> None:
    body = _job(completionMode="Indexed")
    [pod] = new_pod_bodies(body, parse_job(body), PodPlan(create=1, create_indexes=(1,)), SECOND)
    meta = pod["metadata"]
    assert meta["labels"] == {
        "batch.example.com/job-completion-index": "1",
        "batch.example.com/job-name": "j",
        "batch.example.com/controller-uid": "u-1",
    }
    assert meta["annotations"] == {"batch.example.com/job-completion-index": "1"}
    assert meta["finalizers"] == ["batch.example.com/job-tracking"]
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
    assert path == "metadata.labels['batch.example.com/job-completion-index']"
    assert PARALLELJOB.key_prefix not in json.dumps(pod), "nothing of ParallelJob's"


def test_a_second_kind_reads_its_pods_back() -> None:
    body = _job(completionMode="Indexed")
    [pod] = new_pod_bodies(body, parse_job(body), PodPlan(create=1, create_indexes=(1,)), SECOND)
    pod["metadata"].update(name="j-1-x", uid="p-1")
    info = parse_pod(pod, SECOND)
    assert (info.has_finalizer, info.label_uid, info.controller_uid) == (True, "u-1", "u-1")
    assert info.completion_index == 1
    other = parse_pod(pod, PARALLELJOB)
    assert (other.has_finalizer, other.label_uid, other.completion_index) == (False, "", None)


def test_a_kind_names_its_api_paths_and_selector() -> None:
    assert SECOND.path("ns", "j", "status") == "/apis/batch/v1/namespaces/ns/jobs/j/status"
    assert PARALLELJOB.path("ns") == "/apis/paralleljob.dev/v1alpha1/namespaces/ns/paralleljobs"
    assert SECOND.selector("u-1") == "batch.example.com/controller-uid=u-1"


def test_the_shell_syncs_a_second_kind_with_its_keys_and_no_duration_refresh() -> None:
    """The same controller, another kind: its pods get the kind's keys, its status the
    kind's selector, and a status that would only change DURATION is not written."""
    api = FakeApi(_job())
    config = ControllerConfig(sync_batch_seconds=0.0, status_batch_seconds=0.0)
    controller = Controller(api, FakeRecorder(), config, api.pods_of, kind=SECOND)
    rt = JobRuntime(api.job, kind=SECOND)
    report = asyncio.run(controller.syncer.sync(rt))
    created = [call.body for call in api.calls if call.method == "create_pod"]
    assert len(created) == 2
    assert all(body and body["metadata"]["finalizers"] == [SECOND.finalizer] for body in created)
    assert api.job["status"]["selector"] == "batch.example.com/controller-uid=u-1"
    assert report.delay is None, "no DURATION refresh to wait for"
