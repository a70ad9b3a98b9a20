"""KueueController: the Workload decision's writes against an in-memory API, through
the Kueue cache as the informers fill it: the Workload created for a queued job (its
priority read from its class), the job started on admission with the flavor's node
selector, the Workload finished with the job, the finalizer of a gone job's Workload
removed; every write of an object read carries the version read, and its answer is
kept, so the next sync decides on it."""

from __future__ import annotations

import asyncio
import copy
import time
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from paralleljob.config import ControllerConfig
from paralleljob.core import RESOURCE_IN_USE_FINALIZER, ResourceFlavor, parse_workload
from paralleljob.json_types import JsonDict
from paralleljob.kueue.kueue_controller import KueueController
from paralleljob.runtime.api import ApiError
from paralleljob.runtime.kube import Kube
from paralleljob.runtime.kueue_cache import KueueCache
from tests.unit.fake_api import FakeRecorder

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
KEY = "ns/demo"
QUEUE = "kueue.x-k8s.io/queue-name"


def job_body(
    *, suspend: bool = True, labels: dict[str, str] | None = None, **status: Any
) -> JsonDict:
    return {
        "apiVersion": "paralleljob.dev/v1alpha1",
        "kind": "ParallelJob",
        "metadata": {
            "name": "demo",
            "namespace": "ns",
            "uid": "job-uid",
            "resourceVersion": "10",
            "labels": {QUEUE: "lq", **(labels or {})},
        },
        "spec": {
            "suspend": suspend,
            "parallelism": 2,
            "completions": 4,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "w", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                    ],
                }
            },
        },
        "status": dict(status),
    }


class FakeKueueApi:
    """Workloads, the job and the priority classes in memory, as an API server keeps
    them: a resourceVersion bumped by each write, refused (409) when the patch names
    another one; ``refuse`` makes the next call of a method fail."""

    def __init__(self, job: JsonDict) -> None:
        self.job: JsonDict | None = copy.deepcopy(job)
        self.workloads: dict[str, JsonDict] = {}
        self.workload_classes: dict[str, JsonDict] = {}
        self.priority_classes: dict[str, JsonDict] = {}
        self.calls: list[str] = []
        self.refuse: dict[str, ApiError] = {}
        self._version = 20

    def _call(self, method: str) -> None:
        self.calls.append(method)
        if method in self.refuse:
            raise self.refuse.pop(method)

    def _bump(self, obj: JsonDict) -> JsonDict:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        return copy.deepcopy(obj)

    @staticmethod
    def _precondition(obj: JsonDict, patch: JsonDict) -> None:
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != obj["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")

    @staticmethod
    def _merge(into: JsonDict, patch: JsonDict) -> None:
        for key, value in patch.items():
            if value is None:
                into.pop(key, None)
            elif isinstance(value, dict) and isinstance(into.get(key), dict):
                FakeKueueApi._merge(into[key], value)
            else:
                into[key] = copy.deepcopy(value)

    async def create_workload(self, namespace: str, workload: JsonDict) -> JsonDict:
        self._call("create_workload")
        name = workload["metadata"]["name"]
        if name in self.workloads:
            raise ApiError(409, "AlreadyExists", name)
        stored = copy.deepcopy(workload)
        stored["metadata"] |= {"uid": "wl-uid", "generation": 1}
        self.workloads[name] = stored
        return self._bump(stored)

    async def patch_workload(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        self._call("patch_workload")
        if name not in self.workloads:
            raise ApiError(404, "NotFound", name)
        wl = self.workloads[name]
        self._precondition(wl, patch)
        self._merge(wl, {k: v for k, v in patch.items() if k != "status"})
        return self._bump(wl)

    async def patch_workload_status(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        self._call("patch_workload_status")
        wl = self.workloads[name]
        self._precondition(wl, patch)
        self._merge(wl.setdefault("status", {}), patch["status"])
        return self._bump(wl)

    async def delete_workload(self, namespace: str, name: str, uid: str) -> None:
        self._call("delete_workload")
        self.workloads.pop(name)

    async def get_workload_priority_class(self, name: str) -> JsonDict:
        self._call("get_workload_priority_class")
        if name not in self.workload_classes:
            raise ApiError(404, "NotFound", name)
        return self.workload_classes[name]

    async def get_priority_class(self, name: str) -> JsonDict:
        self._call("get_priority_class")
        if name not in self.priority_classes:
            raise ApiError(404, "NotFound", name)
        return self.priority_classes[name]

    async def list_priority_classes(self) -> JsonDict:
        self._call("list_priority_classes")
        return {"items": list(self.priority_classes.values())}

    async def get_job(self, namespace: str, name: str) -> JsonDict:
        self._call("get_job")
        if self.job is None:
            raise ApiError(404, "NotFound", name)
        return copy.deepcopy(self.job)

    async def patch_job(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        self._call("patch_job")
        assert self.job is not None
        self._precondition(self.job, patch)
        meta = {k: v for k, v in (patch.get("metadata") or {}).items() if k != "resourceVersion"}
        self._merge(self.job, {**patch, "metadata": meta})
        return self._bump(self.job)


class Harness:
    def __init__(self, job: JsonDict) -> None:
        self.api = FakeKueueApi(job)
        self.recorder = FakeRecorder()
        self.cache = KueueCache(cast(Kube, object()), ("",))
        self.controller = KueueController(
            self.api,
            self.recorder,
            self.cache,
            ControllerConfig(),
            monotonic=time.monotonic,
            now=lambda: NOW,
        )
        self.cache.job_seen(job)

    def watch_workloads(self) -> None:
        """The Workload informer's view: what the API holds now."""
        for body in self.api.workloads.values():
            self.cache._workload_changed(None, parse_workload(body), False)

    def sync(self) -> float | None:
        return asyncio.run(self.controller.sync(KEY))

    def reasons(self) -> list[str]:
        return [e.reason for e in self.recorder.events]

    @property
    def workload(self) -> JsonDict:
        [wl] = self.api.workloads.values()
        return wl


def admitted(h: Harness, flavor_labels: dict[str, str]) -> None:
    """Kueue's scheduler admits the Workload on flavor ``default``."""
    wl = h.workload
    wl["status"] = {
        "conditions": [
            {
                "type": t,
                "status": "True",
                "reason": t,
                "message": "",
                "lastTransitionTime": "2026-12-07T11:59:00Z",
            }
            for t in ("QuotaReserved", "Admitted")
        ],
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"}, "count": 2}],
        },
    }
    h.api._bump(wl)
    h.cache.flavor_informer.store["f"] = ResourceFlavor("default", flavor_labels)
    h.watch_workloads()


def test_a_queued_job_gets_one_workload_with_its_priority() -> None:
    h = Harness(job_body(labels={"kueue.x-k8s.io/priority-class": "high"}))
    h.api.workload_classes["high"] = {"metadata": {"name": "high"}, "value": 1000}
    assert h.sync() == 0.0
    wl = h.workload
    assert wl["spec"]["queueName"] == "lq"
    assert wl["spec"]["priority"] == 1000
    assert wl["spec"]["priorityClassRef"]["name"] == "high"
    assert wl["spec"]["podSets"][0]["count"] == 2
    [owner] = wl["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("ParallelJob", "job-uid", True)
    assert RESOURCE_IN_USE_FINALIZER in wl["metadata"]["finalizers"]
    assert h.reasons() == ["CreatedWorkload"]
    # Its answer is kept: the next sync (before any watch event) creates nothing.
    assert h.sync() is None
    assert h.api.calls.count("create_workload") == 1
    # The class is read for the Workload's creation only, not at every sync.
    assert h.api.calls.count("get_workload_priority_class") == 1


def test_no_workload_while_the_priority_class_is_missing() -> None:
    h = Harness(job_body(labels={"kueue.x-k8s.io/priority-class": "gone"}))
    assert h.sync() == pytest.approx(1.0)
    assert h.api.workloads == {}


def test_the_global_default_priority_class_is_the_lowest_one() -> None:
    h = Harness(job_body())
    for name, value in (("a", 50), ("b", 20), ("c", 5)):
        h.api.priority_classes[name] = {
            "metadata": {"name": name},
            "value": value,
            "globalDefault": name != "c",
        }
    h.sync()
    assert (h.workload["spec"]["priority"], h.workload["spec"]["priorityClassRef"]["name"]) == (
        20,
        "b",
    )


def test_admitted_the_job_starts_on_the_flavor_with_the_version_it_read() -> None:
    h = Harness(job_body())
    h.sync()
    admitted(h, {"pool": "spot"})
    assert h.sync() == 0.0
    assert h.api.job is not None
    spec = h.api.job["spec"]
    assert spec["suspend"] is False
    assert spec["template"]["spec"]["nodeSelector"] == {"pool": "spot"}
    assert "Started" in h.reasons()


def test_a_stale_job_version_is_refused_and_nothing_else_is_written() -> None:
    h = Harness(job_body())
    h.sync()
    admitted(h, {"pool": "spot"})
    assert h.api.job is not None
    h.api._bump(h.api.job)  # changed since the cache saw it
    with pytest.raises(ApiError) as refused:
        h.sync()
    assert refused.value.conflict
    assert h.api.job["spec"]["suspend"] is True


def test_the_workload_is_finished_with_the_job() -> None:
    h = Harness(job_body())
    h.sync()
    admitted(h, {})
    h.sync()
    done = job_body(suspend=False, succeeded=4)
    done["metadata"]["resourceVersion"] = "99"
    done["status"]["conditions"] = [
        {
            "type": "Complete",
            "status": "True",
            "reason": "",
            "message": "Reached expected number of succeeded pods",
        }
    ]
    h.cache.job_seen(done)
    h.sync()
    finished = [c for c in h.workload["status"]["conditions"] if c["type"] == "Finished"]
    assert [(c["status"], c["reason"]) for c in finished] == [("True", "Succeeded")]


def test_a_gone_job_s_workload_loses_its_finalizer() -> None:
    h = Harness(job_body())
    h.sync()
    h.watch_workloads()
    h.api.job = None
    h.cache.job_deleted("job-uid")
    h.sync()
    assert "get_job" in h.api.calls, "a job the cache lacks is read live"
    assert RESOURCE_IN_USE_FINALIZER not in h.workload["metadata"]["finalizers"]


def test_a_job_never_queued_costs_nothing() -> None:
    body = job_body()
    del body["metadata"]["labels"][QUEUE]
    h = Harness(body)
    assert h.cache.keys() == set()
    assert h.sync() is None
    assert h.api.calls == []


def test_the_cache_keeps_the_newer_of_a_write_and_a_late_event() -> None:
    h = Harness(job_body())
    h.sync()
    stale = copy.deepcopy(h.workload)
    stale["metadata"]["resourceVersion"] = "1"
    h.cache._workload_changed(None, parse_workload(stale), False)
    [kept] = h.cache.workloads_of(KEY)
    assert kept.resource_version == h.workload["metadata"]["resourceVersion"]
