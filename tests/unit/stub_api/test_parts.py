"""The stub API's other pure parts: label selectors, patches, the seeded objects' shape
and size, and the recorder's "every job synced"."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tests.support.stub_api import labels, objects
from tests.support.stub_api.patch import merge_patch, strategic_merge_patch
from tests.support.stub_api.record import Listing, Recorder
from tests.support.stub_api.store import dumps

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
PJ = objects.parallel_job_type("paralleljob.dev/v1alpha1")


# -- selectors ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("", True),
        ("app", True),
        ("!app", False),
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("tier!=db", True),  # a missing key is "not db"
        ("app in (web, api)", True),
        ("app notin (web)", False),
        ("app=web,tier", False),
        ("app in (x,web),!tier", True),
    ],
)
def test_selectors_match_as_the_api_servers_do(selector: str, matches: bool) -> None:
    assert labels.parse(selector).matches({"app": "web"}) is matches


def test_a_selector_that_does_not_parse_is_refused() -> None:
    with pytest.raises(labels.SelectorError):
        labels.parse("app in web")


# -- patches -------------------------------------------------------------------------------
def test_a_merge_patch_merges_maps_and_null_removes() -> None:
    target: dict[str, Any] = {
        "status": {"active": 5, "ready": 5, "texts": {"a": 1}},
        "spec": {"x": [1, 2]},
    }
    patch = {"status": {"ready": None, "active": 4, "texts": {"b": 2}}, "spec": {"x": [3]}}
    assert merge_patch(target, patch) == {
        "status": {"active": 4, "texts": {"a": 1, "b": 2}},
        "spec": {"x": [3]},
    }
    assert target["status"]["ready"] == 5  # not changed in place


def test_a_strategic_patch_removes_a_finalizer_and_an_owner_by_key() -> None:
    meta = {
        "finalizers": ["paralleljob.dev/tracking", "other/keep"],
        "ownerReferences": [{"uid": "a", "kind": "ParallelJob"}, {"uid": "b", "kind": "X"}],
    }
    patch = {
        "metadata": {
            "$deleteFromPrimitiveList/finalizers": ["paralleljob.dev/tracking"],
            "ownerReferences": [{"$patch": "delete", "uid": "a"}],
        }
    }
    assert strategic_merge_patch({"metadata": meta}, patch)["metadata"] == {
        "finalizers": ["other/keep"],
        "ownerReferences": [{"uid": "b", "kind": "X"}],
    }


def test_a_strategic_patch_adds_to_merged_lists() -> None:
    target = {"metadata": {"finalizers": ["a"], "ownerReferences": [{"uid": "1", "name": "x"}]}}
    patch = {"metadata": {"finalizers": ["b", "a"], "ownerReferences": [{"uid": "1", "name": "y"}]}}
    assert strategic_merge_patch(target, patch)["metadata"] == {
        "finalizers": ["a", "b"],
        "ownerReferences": [{"uid": "1", "name": "y"}],
    }


# -- objects ------------------------------------------------------------------------------
def seed(job_type: objects.JobType = PJ) -> objects.JobSeed:
    return objects.JobSeed("ns", "scale-00001", "4f6d0d7e-0000-4000-8000-000000000001", 5, job_type)


def test_a_pod_is_about_5_kb_and_carries_what_the_operator_gives_its_pods() -> None:
    job = seed()
    pod = objects.pod_body(job, "scale-00001-bcdfg", "uid-1", NOW, node=3)
    assert 4_500 < len(dumps(pod)) < 6_000
    meta = pod["metadata"]
    assert meta["labels"][objects.WATCH_LABEL] == job.uid
    assert meta["labels"]["paralleljob.dev/job-name"] == job.name
    assert meta["finalizers"] == [objects.TRACKING_FINALIZER]
    (owner,) = meta["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("ParallelJob", job.uid, True)
    assert {m["manager"] for m in meta["managedFields"]} == {"paralleljob-operator", "kwok"}
    status = pod["status"]
    assert status["phase"] == "Running"
    ready = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "True"


def test_a_running_job_is_about_3_kb_and_its_status_lacks_what_must_be_written() -> None:
    body = objects.job_body(seed(), NOW)
    assert 2_700 < len(dumps(body)) < 3_600
    assert body["metadata"]["generation"] > body["status"]["observedGeneration"]
    assert "ready" not in body["status"]
    job = objects.job_body(seed(objects.BATCH_JOB), NOW)
    assert "startTime" not in job["status"] and "ready" not in job["status"]
    assert job["spec"]["managedBy"] == objects.MANAGED_BY


def test_a_current_job_s_status_lacks_nothing() -> None:
    body = objects.job_body(seed(), NOW, current=True)
    assert body["metadata"]["generation"] == body["status"]["observedGeneration"]
    assert body["status"]["ready"] == 5
    job = objects.job_body(seed(objects.BATCH_JOB), NOW, current=True)
    assert job["status"]["startTime"] and job["status"]["ready"] == 5


def test_a_probe_job_is_new_and_has_no_status() -> None:
    body = objects.job_body(seed(), NOW, running=False)
    assert "status" not in body
    assert body["metadata"]["generation"] == 1


def test_managed_fields_name_list_items_by_key_and_value() -> None:
    fields = objects.fields_v1(
        {
            "metadata": {"finalizers": ["a/b"], "labels": {"x": "1"}},
            "spec": {"containers": [{"name": "w", "image": "i"}]},
        }
    )
    assert fields["f:metadata"]["f:finalizers"] == {".": {}, 'v:"a/b"': {}}
    assert fields["f:metadata"]["f:labels"] == {".": {}, "f:x": {}}
    assert fields["f:spec"]["f:containers"] == {
        'k:{"name":"w"}': {".": {}, "f:name": {}, "f:image": {}}
    }


def test_a_created_pod_is_pending_and_defaulted() -> None:
    body = {"metadata": objects.pod_meta(seed()), "spec": objects.template(seed())["spec"]}
    pod = objects.created_pod(body, "x", "2026-12-01T12:00:00Z", "paralleljob-operator")
    assert pod["status"]["phase"] == "Pending"
    assert pod["spec"]["serviceAccountName"] == "default"
    assert pod["metadata"]["managedFields"][0]["manager"] == "paralleljob-operator"
    assert "status" not in body  # the request body is left alone


# -- recorder ------------------------------------------------------------------------------
def test_every_job_synced_is_every_expected_job_written_once() -> None:
    recorder = Recorder(clock=lambda: 5.0)
    called: list[str] = []
    recorder.on_synced.append(lambda: called.append("synced"))
    recorder.expect(["a", "b"])
    recorder.status_written("a")
    recorder.status_written("a")
    recorder.status_written("probe")
    assert not recorder.all_synced.is_set()
    recorder.status_written("b")
    assert recorder.all_synced.is_set() and called == ["synced"]
    assert recorder.status_writes["a"] == 2 and recorder.synced() == 2


def test_a_job_written_before_it_was_expected_counts_as_synced() -> None:
    recorder = Recorder(clock=lambda: 5.0)
    recorder.status_written("a")
    recorder.expect(["a", "b"])
    assert recorder.synced() == 1 and not recorder.all_synced.is_set()
    recorder.status_written("b")
    assert recorder.all_synced.is_set() and recorder.synced_at == 5.0


def test_every_job_synced_can_be_marked_once_where_no_write_is_due() -> None:
    recorder = Recorder(clock=lambda: 7.0)
    called: list[str] = []
    recorder.on_synced.append(lambda: called.append("synced"))
    recorder.expect(["a", "b"])
    recorder.mark_synced()
    recorder.mark_synced()
    recorder.status_written("a")
    assert called == ["synced"] and recorder.synced() == 2 and recorder.synced_at == 7.0


def test_the_pods_are_listed_at_an_informer_s_last_page_not_at_one_job_s_pods() -> None:
    recorder = Recorder(clock=lambda: 7.0)
    recorder.listed(Listing(1.0, "pods", 5, 100, paged=False, last_page=True))
    assert recorder.pods_listed_at is None, "an early sync's LIST of one job's pods"
    recorder.listed(Listing(2.0, "pods", 500, 10_000, paged=True, last_page=False))
    recorder.listed(Listing(3.0, "pods", 20, 400, paged=True, last_page=True))
    assert recorder.pods_listed_at == 3.0
