"""The stub API over HTTP, as a client sees it: discovery, paged LISTs (JSON and
metadata only), watches from a resourceVersion with bookmarks and 410, writes with
preconditions, and what the recorder makes of them."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.stub_api import objects, resources
from tests.support.stub_api.apiserver import StubServer, next_bookmark_time, resolve
from tests.support.stub_api.record import Recorder
from tests.support.stub_api.store import Store

NOW = datetime(2026, 12, 1, tzinfo=UTC)
#: The pins the stub answers /version from, as the local cluster would.
VERSIONS_ENV = Path(__file__).resolve().parents[3] / "hack" / "versions.env"
CRD = resources.load_crd()
PJ = CRD.storage
JOB = objects.JobSeed("ns", "scale-1", "job-uid-1", 2, objects.parallel_job_type(PJ.api_version))


def test_paths_resolve_to_their_resource_namespace_object_and_subresource() -> None:
    kinds = [*resources.builtin_kinds(), *CRD.kinds]
    pods = resolve("/api/v1/namespaces/ns/pods", kinds)
    assert pods is not None and (pods.kind, pods.namespace, pods.name) == (resources.POD, "ns", "")
    status = resolve(f"/apis/{PJ.api_version}/namespaces/ns/paralleljobs/x/status", kinds)
    assert status is not None and (status.kind, status.name, status.sub) == (PJ, "x", "status")
    namespace = resolve("/api/v1/namespaces/ns", kinds)
    assert namespace is not None and (namespace.kind, namespace.name) == (resources.NAMESPACE, "ns")
    assert resolve("/api/v1/pods", kinds) is not None
    assert resolve("/api/v1/namespaces/ns/pods/x/log", kinds) is None
    assert resolve("/apis/nothing.example/v1/things", kinds) is None


def seeded() -> Store:
    store = Store([*resources.builtin_kinds(), *CRD.kinds])
    store.create(resources.NAMESPACE, "", {"metadata": {"name": "ns"}})
    store.create(PJ, "ns", objects.job_body(JOB, NOW))
    for i in range(JOB.pods):
        store.create(
            resources.POD, "ns", objects.pod_body(JOB, f"scale-1-p{i}", f"pod-{i}", NOW, i)
        )
    store.create(resources.POD, "ns", {"metadata": {"name": "unlabelled"}})
    store.compact()
    return store


Test = Callable[[aiohttp.ClientSession, StubServer], Awaitable[None]]


@asynccontextmanager
async def serving(store: Store) -> AsyncIterator[tuple[aiohttp.ClientSession, StubServer]]:
    server = StubServer(store, Recorder(), bookmark_seconds=0.05)
    await server.start()
    try:
        async with aiohttp.ClientSession(base_url=server.url) as session:
            yield session, server
    finally:
        await server.stop()


def run(test: Test) -> None:
    async def main() -> None:
        async with serving(seeded()) as (session, server):
            await test(session, server)

    asyncio.run(main())


async def get(session: aiohttp.ClientSession, path: str, **kw: Any) -> Any:
    async with session.get(path, **kw) as response:
        return response.status, await response.json()


async def watch_until(
    session: aiohttp.ClientSession,
    path: str,
    params: dict[str, str],
    done: Callable[[list[dict[str, Any]]], bool],
) -> list[dict[str, Any]]:
    """The watch's events, read until ``done`` says so."""
    lines: list[dict[str, Any]] = []
    async with session.get(path, params={**params, "watch": "true"}) as response:
        assert response.status == 200
        async for raw in response.content:
            lines.append(json.loads(raw))
            if done(lines):
                break
    return lines


async def watch_lines(
    session: aiohttp.ClientSession, path: str, params: dict[str, str], count: int
) -> list[dict[str, Any]]:
    return await watch_until(session, path, params, lambda lines: len(lines) == count)


def _bookmarked_after_a_change(lines: list[dict[str, Any]]) -> bool:
    return any(line["type"] == "MODIFIED" for line in lines) and lines[-1]["type"] == "BOOKMARK"


def test_discovery_names_the_crds_resource_and_subresources() -> None:
    async def test(session: aiohttp.ClientSession, server: StubServer) -> None:
        _, groups = await get(session, "/apis")
        assert "paralleljob.dev" in [g["name"] for g in groups["groups"]]
        _, listed = await get(session, f"/apis/{PJ.api_version}")
        names = {r["name"] for r in listed["resources"]}
        assert {"paralleljobs", "paralleljobs/status", "paralleljobs/scale"} <= names
        _, version = await get(session, "/version")
        pinned = re.search(r"^KUBERNETES_VERSION=(\S+)", VERSIONS_ENV.read_text(), re.M)
        assert pinned is not None and version["gitVersion"] == pinned.group(1)
        assert f"v{version['major']}.{version['minor']}." in version["gitVersion"]

    run(test)


def test_a_paged_list_by_label_returns_each_pod_once_at_one_version() -> None:
    async def test(session: aiohttp.ClientSession, server: StubServer) -> None:
        query = {"labelSelector": objects.WATCH_LABEL, "limit": "2"}
        seen: list[str] = []
        versions = set()
        token = ""
        while True:
            params = {**query, **({"continue": token} if token else {})}
            status, page = await get(session, "/api/v1/pods", params=params)
            assert status == 200 and page["kind"] == "PodList"
            seen += [p["metadata"]["name"] for p in page["items"]]
            versions.add(page["metadata"]["resourceVersion"])
            token = page["metadata"].get("continue", "")
            if not token:
                break
        assert seen == [f"scale-1-p{i}" for i in range(JOB.pods)]
        assert len(versions) == 1
        assert "kind" not in page["items"][0]  # a typed list's items carry no kind

    run(test)


def test_a_metadata_only_list_holds_partial_objects() -> None:
    async def test(session: aiohttp.ClientSession, server: StubServer) -> None:
        accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
        path = f"/apis/{PJ.api_version}/paralleljobs"
        _, page = await get(session, path, headers={"Accept": accept})
        assert page["kind"] == "PartialObjectMetadataList"
        (item,) = page["items"]
        assert set(item) == {"kind", "apiVersion", "metadata"}
        assert item["metadata"]["uid"] == JOB.uid

    run(test)


def test_a_status_write_is_answered_fresh_and_watched_then_bookmarked() -> None:
    async def test(session: aiohttp.ClientSession, server: StubServer) -> None:
        path = f"/apis/{PJ.api_version}/namespaces/ns/paralleljobs/{JOB.name}"
        _, job = await get(session, path)
        version = job["metadata"]["resourceVersion"]
        # Watched from the list's version: the job's own is older than the compaction.
        _, listed = await get(session, f"/apis/{PJ.api_version}/paralleljobs")
        # Bookmarks come every 50 ms here: some may come before the change.
        watching = asyncio.create_task(
            watch_until(
                session,
                f"/apis/{PJ.api_version}/paralleljobs",
                {
                    "resourceVersion": listed["metadata"]["resourceVersion"],
                    "allowWatchBookmarks": "true",
                },
                _bookmarked_after_a_change,
            )
        )
        patch = {"metadata": {"resourceVersion": version}, "status": {"ready": 2}, "spec": {"x": 1}}
        headers = {"Content-Type": "application/merge-patch+json"}
        async with session.patch(f"{path}/status", json=patch, headers=headers) as response:
            written = await response.json()
        assert int(written["metadata"]["resourceVersion"]) > int(version)
        assert written["status"]["ready"] == 2 and "x" not in written["spec"]  # status only
        async with session.patch(f"{path}/status", json=patch, headers=headers) as response:
            assert response.status == 409  # the version it was computed from is gone
        lines = await watching
        changes = [line for line in lines if line["type"] != "BOOKMARK"]
        assert [(c["type"], c["object"]["status"]["ready"]) for c in changes] == [("MODIFIED", 2)]
        bookmark = lines[-1]
        assert (
            bookmark["object"]["metadata"]["resourceVersion"]
            == written["metadata"]["resourceVersion"]
        )
        assert server.recorder.status_writes[JOB.uid] == 1

    run(test)


def test_a_watch_from_before_the_history_is_an_error_event_410() -> None:
    async def test(session: aiohttp.ClientSession, server: StubServer) -> None:
        (error,) = await watch_lines(session, "/api/v1/pods", {"resourceVersion": "1"}, 1)
        assert error["type"] == "ERROR" and error["object"]["code"] == 410

    run(test)


def test_a_created_pod_is_named_and_recorded_under_its_job() -> None:
    async def test(session: aiohttp.ClientSession, server: StubServer) -> None:
        body = {"metadata": objects.pod_meta(JOB), "spec": objects.template(JOB)["spec"]}
        headers = {"User-Agent": "paralleljob-operator"}
        async with session.post(
            "/api/v1/namespaces/ns/pods", json=body, headers=headers
        ) as response:
            assert response.status == 201
            pod = await response.json()
        assert pod["metadata"]["name"].startswith(f"{JOB.name}-")
        assert pod["status"]["phase"] == "Pending"
        assert JOB.uid in server.recorder.first_pod_post
        async with session.post("/api/v1/namespaces/missing/pods", json=body) as response:
            assert response.status == 404

    run(test)


def _pod_reaching(phase: str, **delays: float) -> dict[str, Any]:
    """A pod POSTed to a stub with the kubelet ``delays`` given, once its stored phase is
    ``phase`` (within 5 s)."""

    async def main() -> dict[str, Any]:
        store = seeded()
        server = StubServer(store, Recorder(), **delays)
        await server.start()
        body = {"metadata": objects.pod_meta(JOB), "spec": objects.template(JOB)["spec"]}
        try:
            async with (
                aiohttp.ClientSession(base_url=server.url) as session,
                session.post("/api/v1/namespaces/ns/pods", json=body) as response,
            ):
                name = (await response.json())["metadata"]["name"]
            deadline = asyncio.get_running_loop().time() + 5
            while True:
                pod: dict[str, Any] = json.loads(store.get(resources.POD, "ns", name).bare)
                if pod["status"].get("phase") == phase:
                    return pod
                assert asyncio.get_running_loop().time() < deadline, (
                    f"the pod never reached {phase}"
                )
                await asyncio.sleep(0.01)
        finally:
            await server.stop()

    return asyncio.run(main())


def test_a_created_pod_runs_after_the_delay_given_as_a_kubelet_would_start_it() -> None:
    pod = _pod_reaching("Running", run_pods_after=0.01)
    assert pod["status"]["containerStatuses"][0]["ready"] is True
    assert pod["spec"]["nodeName"]


def test_a_running_pod_succeeds_after_the_delay_given_as_its_container_exits_0() -> None:
    status = _pod_reaching("Succeeded", run_pods_after=0.01, succeed_pods_after=0.01)["status"]
    [container] = status["containerStatuses"]
    assert container["state"]["terminated"]["exitCode"] == 0
    assert container["ready"] is False
    ready = {c["type"]: c["status"] for c in status["conditions"]}
    assert ready["Ready"] == "False" and ready["PodScheduled"] == "True"


def test_a_path_not_served_is_404_and_recorded() -> None:
    async def test(session: aiohttp.ClientSession, server: StubServer) -> None:
        status, body = await get(session, "/apis/kopf.dev/v1/kopfpeerings")
        assert status == 404 and body["kind"] == "Status"
        assert server.recorder.unknown == {"GET /apis/kopf.dev/v1/kopfpeerings": 1}

    run(test)


@pytest.mark.parametrize(
    ("now", "end", "expected"),
    [
        pytest.param(0.0, 1800.0, 0.05, id="a long watch: every period"),
        pytest.param(0.0, 3.0, 0.05, id="a short watch: every period, before its end"),
        pytest.param(0.0, 2.04, 0.04, id="two seconds before the end, if sooner"),
        pytest.param(0.5, 2.0, math.inf, id="past that: no more"),
    ],
)
def test_bookmarks_come_every_period_and_before_the_deadline(
    now: float, end: float, expected: float
) -> None:
    assert next_bookmark_time(now, end, 0.05) == pytest.approx(expected)


def test_a_short_watch_with_nothing_to_bring_ends_with_a_bookmark_at_the_current_version() -> None:
    """The operator's catch-up (informer.py) reads the current version from it."""

    async def test(session: aiohttp.ClientSession, server: StubServer) -> None:
        _, listed = await get(session, "/api/v1/pods", params={"limit": "1"})
        rv = listed["metadata"]["resourceVersion"]
        server.bookmark_seconds = 60.0
        params = {"resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "3"}
        (bookmark,) = await watch_lines(session, "/api/v1/pods", params, 1)
        assert bookmark["type"] == "BOOKMARK"
        assert bookmark["object"]["metadata"]["resourceVersion"] == rv

    run(test)
