"""The write fence (election/fence.py) and the client asking it before each write."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from aiohttp import web

from paralleljob.constants import NOT_LEADING
from paralleljob.election.fence import WriteFence, boot_clock
from paralleljob.runtime import metrics
from paralleljob.runtime.kube import ApiError, Kube, load_configuration, user_agent
from tests.unit.jobs.support import serving


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_shut_until_opened_and_after_its_deadline() -> None:
    clock = Clock()
    fence = WriteFence(clock)
    with pytest.raises(ApiError) as refused:
        fence.check("POST", "/api/v1/namespaces/ns/pods")
    assert (refused.value.status, refused.value.reason) == (0, NOT_LEADING)
    fence.open_until(110.0)
    fence.check("POST", "/api/v1/namespaces/ns/pods")
    clock.t = 110.0
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        with pytest.raises(ApiError):
            fence.check(method, "/x")
    assert fence.refused == 5


@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS"])
def test_reads_always_pass(method: str) -> None:
    WriteFence(Clock()).check(method, "/api/v1/pods")


def test_close_shuts_it_at_once() -> None:
    clock = Clock()
    fence = WriteFence(clock)
    fence.open_until(1e9)
    fence.close()
    assert not fence.is_open()


def test_the_boot_clock_moves_forward() -> None:
    first = boot_clock()
    assert boot_clock() >= first > 0


def test_the_user_agent_names_the_replica() -> None:
    assert user_agent("op-a") == "paralleljob-operator/op-a"
    assert user_agent("") == "paralleljob-operator"


def test_a_write_the_fence_refuses_never_reaches_the_api_server(tmp_path: Path) -> None:
    """The client asks the fence after its rate limiter and request slot: a write that
    waited there while the Lease expired is not sent; reads go out as before."""
    received: list[tuple[str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        received.append((request.method, request.headers.get("User-Agent", "")))
        return web.json_response({"kind": "Pod", "metadata": {"name": "p"}})

    async def scenario() -> None:
        async with serving(handle, tmp_path / "kubeconfig") as kubeconfig:
            clock = Clock()
            fence = WriteFence(clock)
            kube = Kube(
                await load_configuration(str(kubeconfig)),
                fence=fence,
                user_agent=user_agent("op-a"),
            )
            before = metrics.WRITES_FENCED.labels("POST", "pods")._value.get()
            try:
                fence.open_until(clock.t + 1)
                await kube.create_pod("ns", {"metadata": {"generateName": "p-"}})
                clock.t += 1
                with pytest.raises(ApiError) as refused:
                    await kube.create_pod("ns", {"metadata": {"generateName": "p-"}})
                assert refused.value.reason == NOT_LEADING
                await kube.request("GET", "/api/v1/namespaces/ns/pods")
            finally:
                await kube.close()
        assert metrics.WRITES_FENCED.labels("POST", "pods")._value.get() == before + 1

    asyncio.run(scenario())
    assert received == [
        ("POST", "paralleljob-operator/op-a"),
        ("GET", "paralleljob-operator/op-a"),
    ]


def test_a_write_waits_for_its_answer_no_longer_than_the_fence_is_open(tmp_path: Path) -> None:
    """The request's deadline is the fence's validity: an answer that would come after
    the Lease may have passed to another replica is not waited for (a read still is)."""

    async def handle(request: web.Request) -> web.Response:
        if request.method == "POST":
            await asyncio.sleep(2)  # a slow API server; cancelled when the client gives up
        return web.json_response({"kind": "Pod", "metadata": {"name": "p"}})

    async def scenario() -> tuple[str, float, str]:
        async with serving(handle, tmp_path / "kubeconfig") as kubeconfig:
            fence = WriteFence()
            kube = Kube(await load_configuration(str(kubeconfig)), fence=fence)
            try:
                fence.open_until(boot_clock() + 0.3)
                started = time.monotonic()
                with pytest.raises(ApiError) as timed_out:
                    await kube.create_pod("ns", {"metadata": {"generateName": "p-"}})
                waited = time.monotonic() - started
                read = await kube.request("GET", "/api/v1/namespaces/ns/pods")
            finally:
                await kube.close()
        return timed_out.value.reason, waited, read["metadata"]["name"]

    reason, waited, read = asyncio.run(scenario())
    assert (reason, read) == ("Unreachable", "p")
    assert waited < 1.5, f"waited {waited:.1f}s for a write the fence allowed 0.3s"
