"""The Fence (fence_object.py): the new leader names itself where the API server judges
the operator's writes, over whatever version it read, only while its own fence is open;
and the campaign names it before the operator leads."""

from __future__ import annotations

import asyncio
import copy
import math
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest

from paralleljob import constants as c
from paralleljob.election.elector import Elector
from paralleljob.election.fence import WriteFence
from paralleljob.election.fence_object import FenceObject, fence_path
from paralleljob.election.standby import campaign, name_in_fence
from paralleljob.json_types import JsonDict
from paralleljob.runtime.api import ApiError
from paralleljob.runtime.kube import Kube
from tests.unit.jobs.support import FakeClock, FakeLeaseServer, candidate

NS, NAME = "paralleljob-system", "paralleljob-operator"
PATH = fence_path(NS, NAME)


class FakeFences:
    """The Fence kind's API for one object: resourceVersion preconditions as the API
    server has them; ``before_write`` runs just before each write lands (a rival's)."""

    def __init__(self, served: bool = True) -> None:
        self.served = served
        self.stored: JsonDict | None = None
        self.version = 0
        self.sent: list[tuple[str, str]] = []
        self.before_write: list[JsonDict] = []
        self.timeouts: list[float] = []

    def _store(self, body: JsonDict) -> JsonDict:
        self.version += 1
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.stored = stored
        return copy.deepcopy(stored)

    def _rival_writes(self) -> None:
        if self.before_write:
            rival = self.before_write.pop(0)
            self._store({"metadata": {"name": NAME, "namespace": NS}, "spec": rival})

    async def request(
        self, method: str, path: str, *, body: Any = None, timeout: float = 60.0
    ) -> JsonDict:
        self.sent.append((method, path))
        self.timeouts.append(timeout)
        if not self.served:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if method == "GET":
            if self.stored is None:
                raise ApiError(404, "NotFound", f'fences "{NAME}" not found')
            return copy.deepcopy(self.stored)
        if method == "DELETE":
            if self.stored is None:
                raise ApiError(404, "NotFound", f'fences "{NAME}" not found')
            self.stored = None
            return {}
        self._rival_writes()
        if method == "POST":
            if self.stored is not None:
                raise ApiError(409, "AlreadyExists", f'fences "{NAME}" already exists')
            return self._store(body)
        assert method == "PUT" and self.stored is not None
        if body["metadata"]["resourceVersion"] != self.stored["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        return self._store(body)

    @property
    def holder(self) -> str:
        assert self.stored is not None
        return str(self.stored["spec"]["holderIdentity"])


def _fence(seconds: float = 6.0) -> WriteFence:
    fence = WriteFence(lambda: 0.0)
    fence.open_until(seconds)
    return fence


def _object(api: FakeFences) -> FenceObject:
    return FenceObject(cast(Kube, api), NS, NAME)


def test_the_first_leader_creates_the_fence_naming_it() -> None:
    api = FakeFences()
    assert asyncio.run(_object(api).claim("pod-a", 0, _fence())) is True
    assert api.sent == [("GET", PATH), ("POST", fence_path(NS))]
    assert api.stored is not None
    assert api.stored["apiVersion"] == f"{c.GROUP}/{c.VERSION}"
    assert api.stored["kind"] == "Fence"
    assert api.stored["spec"] == {"holderIdentity": "pod-a", "leaseTransitions": 0}


def test_a_new_leader_writes_over_the_version_it_read() -> None:
    api = FakeFences()
    asyncio.run(_object(api).claim("pod-a", 0, _fence()))
    assert asyncio.run(_object(api).claim("pod-b", 1, _fence())) is True
    assert api.sent[-2:] == [("GET", PATH), ("PUT", PATH)]
    assert api.holder == "pod-b"
    assert api.stored is not None and api.stored["spec"]["leaseTransitions"] == 1


@pytest.mark.parametrize("exists", [False, True], ids=["create", "update"])
def test_a_lost_race_reads_again_and_names_this_leader(exists: bool) -> None:
    api = FakeFences()
    if exists:
        asyncio.run(_object(api).claim("pod-a", 0, _fence()))
    api.before_write = [{"holderIdentity": "pod-c", "leaseTransitions": 2}]
    assert asyncio.run(_object(api).claim("pod-b", 3, _fence())) is True
    assert api.holder == "pod-b"
    assert [m for m, _ in api.sent].count("GET") == (3 if exists else 2)


def test_nothing_is_written_once_this_processs_fence_is_shut() -> None:
    """A leader whose Lease may be another's by its own clock sends no write of the
    Fence: its read could be answered with the new leader's version."""
    api = FakeFences()
    asyncio.run(_object(api).claim("pod-b", 1, _fence()))
    with pytest.raises(ApiError) as refused:
        asyncio.run(_object(api).claim("pod-a", 0, _fence(0.0)))
    assert refused.value.reason == c.NOT_LEADING
    assert api.holder == "pod-b"
    assert api.sent[-1] == ("GET", PATH)


def test_a_write_waits_no_longer_than_the_fence_is_open() -> None:
    api = FakeFences()
    asyncio.run(_object(api).claim("pod-a", 0, _fence(2.5)))
    assert api.timeouts[-1] == 2.5


def test_a_cluster_without_the_fence_kind_is_said_so() -> None:
    assert asyncio.run(_object(FakeFences(served=False)).claim("pod-a", 0, _fence())) is False


def test_delete_leaves_no_fence_and_minds_none_being_there() -> None:
    api = FakeFences()
    asyncio.run(_object(api).claim("pod-a", 0, _fence()))
    asyncio.run(_object(api).delete())
    asyncio.run(_object(api).delete())
    assert api.stored is None


# -- the campaign names the leader before it leads ---------------------------------------


def _campaign(
    elector: Elector,
    lead: Callable[[asyncio.Event], Awaitable[None]],
    seen: list[str],
    name_leader: Callable[[], Awaitable[None]],
) -> int:
    async def freed() -> None:
        seen.append("ports freed")

    return asyncio.run(
        campaign(
            elector,
            lead,
            stop=asyncio.Event(),
            before_leading=freed,
            exit_now=lambda: seen.append("exit"),
            name_leader=name_leader,
        )
    )


def test_the_campaign_names_the_leader_in_the_fence_before_it_leads() -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    api = FakeFences()
    seen: list[str] = []

    async def lead(stop: asyncio.Event) -> None:
        seen.append(f"leading (fence names {api.holder})")

    status = _campaign(a, lead, seen, lambda: name_in_fence(a, _object(api)))
    assert status == 0
    assert seen == ["ports freed", "leading (fence names pod-a)"]
    assert server.record is not None
    assert api.stored is not None
    assert api.stored["spec"]["leaseTransitions"] == a.transitions


def test_a_leader_that_loses_the_lease_before_the_fence_names_it_never_leads() -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, lock = candidate("pod-a", server, clock)
    seen: list[str] = []

    async def never_named() -> None:
        lock.down = True  # renewals fail from now on
        await asyncio.Event().wait()

    async def lead(stop: asyncio.Event) -> None:
        seen.append("leading")

    assert _campaign(a, lead, seen, never_named) == 1
    assert seen == ["ports freed", "exit"]


def test_naming_is_retried_until_the_api_server_takes_it() -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    assert asyncio.run(a.try_acquire_or_renew())
    a.fence.open_until(math.inf)
    api = FakeFences()
    failures = [ApiError(500, "InternalError", "etcd leader changed")] * 2
    real = api.request

    async def flaky(method: str, path: str, **kwargs: Any) -> JsonDict:
        if method != "GET" and failures:
            raise failures.pop()
        return await real(method, path, **kwargs)

    api.request = flaky  # type: ignore[method-assign]
    before = clock.t
    asyncio.run(name_in_fence(a, _object(api)))
    assert api.holder == "pod-a"
    assert clock.t - before == 2 * a.config.retry_period_seconds
