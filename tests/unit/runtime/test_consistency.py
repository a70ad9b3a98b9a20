"""Read-your-writes (runtime/consistency.py), as upstream's consistency_test.go and the
job controller's stale-sync skip (Kubernetes 1.36, StaleControllerConsistencyJob)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

import pytest
from prometheus_client import REGISTRY

from paralleljob.jobs.job_runtime import JobRuntime
from paralleljob.runtime.consistency import (
    JOBS,
    PODS,
    STALE_RETRY_BASE_SECONDS,
    Stale,
    WrittenVersions,
)
from tests.unit.fake_api import FakeApi
from tests.unit.jobs.support import JOB, controller_for


def _reader(versions: Mapping[str, int | None]) -> Any:
    def read(resource: str, namespace: str) -> int | None:
        assert namespace == "ns"
        return versions.get(resource)

    return read


@pytest.mark.parametrize(
    ("written", "read", "stale"),
    [
        ({}, {PODS: 1}, None),
        ({PODS: "10"}, {PODS: 10}, None),
        ({PODS: "10"}, {PODS: 11}, None),
        ({PODS: "10"}, {PODS: 9}, Stale(PODS, 10, 9)),
        ({JOBS: "7", PODS: "10"}, {JOBS: 6, PODS: 12}, Stale(JOBS, 7, 6)),
        # Fails open: a cache listing again (no version), a version that is no number.
        ({PODS: "10"}, {}, None),
        ({PODS: "not-a-number"}, {PODS: 1}, None),
    ],
)
def test_ensure_ready(written: dict[str, str], read: dict[str, int], stale: Stale | None) -> None:
    record = WrittenVersions()
    for resource, version in written.items():
        record.wrote(resource, version)
    assert record.stale("ns", _reader(dict(read))) == stale
    assert bool(record.versions) is (stale is not None), "a passed check clears the record"


def test_only_the_newest_write_is_kept() -> None:
    record = WrittenVersions()
    for version in ("5", "9", "7", None, ""):
        record.wrote(PODS, version)
    assert record.versions == {PODS: 9}


def test_a_skipped_sync_backs_off_until_a_check_passes() -> None:
    record = WrittenVersions()
    record.wrote(PODS, "10")
    behind = _reader({PODS: 3})
    delays = []
    for _ in range(3):
        assert record.stale("ns", behind) is not None
        delays.append(record.retry_in())
    assert delays == [STALE_RETRY_BASE_SECONDS * 2**i for i in range(3)]
    assert record.stale("ns", _reader({PODS: 10})) is None
    record.wrote(PODS, "11")
    assert record.stale("ns", behind) is not None
    assert record.retry_in() == STALE_RETRY_BASE_SECONDS, "the back-off starts over"


def _skips(resource: str, group: str = "") -> float:
    labels = {"group": group, "resource": resource}
    name = "paralleljob_controller_stale_sync_skips_total"
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_no_sync_before_the_pod_cache_shows_the_pods_it_created() -> None:
    """The pods' creations returned resourceVersions 101 and 102: while the pod cache is
    at 100 the next sync makes no call and counts a skip; at 102 it runs."""

    async def run() -> tuple[list[str], float | None, bool, float]:
        api = FakeApi(copy.deepcopy(JOB))
        versions = iter(range(101, 200))
        create = api.create_pod

        async def create_pod(namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
            stored = await create(namespace, pod)
            stored["metadata"]["resourceVersion"] = str(next(versions))
            return stored

        api.create_pod = create_pod  # type: ignore[method-assign]
        controller = controller_for(api)
        cache = {PODS: 100, JOBS: 1000}
        controller.cache_version = _reader(cache)
        rt = JobRuntime(api.job)
        await controller.syncer.sync(rt)
        calls = len(api.calls)
        before = _skips(PODS)
        skipped = await controller.syncer.sync(rt)
        methods = [c.method for c in api.calls[calls:]]
        counted = _skips(PODS) - before
        cache[PODS] = 102
        ran = await controller.syncer.sync(rt)
        return methods, skipped.delay, ran.result is not None, counted

    methods, delay, ran, counted = asyncio.run(run())
    assert methods == [], "the skipped sync made no call"
    assert delay == STALE_RETRY_BASE_SECONDS
    assert counted == 1
    assert ran


def test_no_sync_before_the_job_cache_shows_the_status_written() -> None:
    """The job's status write is a write to the job: the job cache must show it too
    (group and resource of the job's kind in the metric)."""

    async def run() -> tuple[bool, bool, float]:
        api = FakeApi(copy.deepcopy(JOB))
        controller = controller_for(api)
        cache: dict[str, int | None] = {PODS: None, JOBS: 1}
        controller.cache_version = _reader(cache)
        rt = JobRuntime(api.job)
        await controller.syncer.sync(rt)  # creates the pods, writes active=2
        assert rt.own_writes.versions.get(JOBS) == int(api.job["metadata"]["resourceVersion"])
        before = _skips("paralleljobs", "paralleljob.dev")
        skipped = await controller.syncer.sync(rt)
        counted = _skips("paralleljobs", "paralleljob.dev") - before
        cache[JOBS] = int(api.job["metadata"]["resourceVersion"])
        ran = await controller.syncer.sync(rt)
        return skipped.result is None, ran.result is not None, counted

    skipped, ran, counted = asyncio.run(run())
    assert skipped and ran and counted == 1
