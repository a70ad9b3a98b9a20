"""The elector (elector.py): its loops against an in-memory Lease with resourceVersion
semantics (no API server), the write fence each renewal opens, and the real lock
(lease_lock.py) through the operator's client against an API server's Lease rules."""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from paralleljob.config import LeaderElectionConfig
from paralleljob.core.lease import LeaseRecord, Observation, micro_time, yield_window
from paralleljob.election.elector import Elector, SystemClock
from paralleljob.election.lease_lock import KubeLeaseLock
from paralleljob.runtime.api import ApiError
from paralleljob.runtime.kube import Kube, load_configuration
from tests.support.wait import wait_until_async
from tests.unit.jobs.support import (
    KCM_TIMINGS,
    FakeClock,
    FakeLeaseServer,
    FakeLock,
    attempt,
    candidate,
    free_port,
    local_kubeconfig,
)

SETTINGS = LeaderElectionConfig(**KCM_TIMINGS)


# -- the elector against an in-memory Lease ------------------------------------------------


def test_an_elector_needs_an_identity() -> None:
    with pytest.raises(ValueError, match="identity"):
        Elector(FakeLock(FakeLeaseServer()), LeaderElectionConfig())


def test_the_first_candidate_creates_the_lease_and_leads() -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    assert attempt(a) and a.leading
    stamp = micro_time(clock.now())
    assert server.writes == [("create", LeaseRecord("pod-a", 15, stamp, stamp, 0))]


def test_a_standby_takes_over_only_a_full_lease_after_it_last_saw_a_renewal() -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    b, _ = candidate("pod-b", server, clock)
    assert attempt(a)
    clock.t += 1
    assert not attempt(b) and b.holder == "pod-a"
    clock.t += 1
    assert attempt(a), "renewed (the fast path: one write)"
    assert [verb for verb, _ in server.writes] == ["create", "update"]
    clock.t += 1
    assert not attempt(b)  # sees the renewal: its 15 s start again now
    seen_renewal = clock.t
    # pod-a dies here and renews no more.
    clock.t = seen_renewal + 14.9
    assert not attempt(b)
    clock.t = seen_renewal + 15
    assert attempt(b) and b.leading
    assert server.record is not None
    assert (server.record.holder, server.record.transitions) == ("pod-b", 1)


def test_of_two_standbys_racing_for_an_expired_lease_one_wins_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    b, _ = candidate("pod-b", server, clock)
    c, _ = candidate("pod-c", server, clock)
    assert attempt(a)
    assert not attempt(b) and not attempt(c)
    clock.t += 15

    async def race() -> list[bool]:
        return list(await asyncio.gather(b.try_acquire_or_renew(), c.try_acquire_or_renew()))

    caplog.set_level(logging.DEBUG)
    assert sorted(asyncio.run(race())) == [False, True]
    assert server.record is not None and server.record.holder in ("pod-b", "pod-c")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_a_released_lease_is_taken_at_once() -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    b, _ = candidate("pod-b", server, clock)
    assert attempt(a)
    assert not attempt(b)
    assert asyncio.run(a.release()) and not a.leading
    assert server.record is not None and server.record.holder == ""
    assert attempt(b), "no wait for the lease to expire"
    assert not asyncio.run(a.release()), "not its lease any more"
    assert server.record.holder == "pod-b"


def test_a_restarted_process_hands_its_pods_lease_over_to_a_warm_standby() -> None:
    """The pod's name is its identity: a container restarted in the same pod finds the
    lease naming it, held by its previous process, which is gone. It releases it for the
    standby, whose caches are in sync (its own have just started listing)."""
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    standby, _ = candidate("pod-b", server, clock)
    assert attempt(a)
    assert not attempt(standby)
    again, _ = candidate("pod-a", server, clock)
    assert not attempt(again) and not again.leading
    assert server.record is not None and server.record.holder == ""
    clock.t += 1
    assert not attempt(again), "it leaves the lease to a standby's next look"
    assert attempt(standby), "no wait for the lease to expire"
    assert server.record.holder == "pod-b" and server.record.transitions == 1


def test_a_restarted_process_with_no_standby_takes_its_lease_back_after_the_window() -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    assert attempt(a)
    again, _ = candidate("pod-a", server, clock)
    assert not attempt(again)
    window = yield_window(KCM_TIMINGS["retry_period_seconds"])
    assert window == pytest.approx(2 * 2 * (1 + 1.2)), "two of a standby's longest waits"
    clock.t += window - 0.1
    assert not attempt(again)
    clock.t += 0.1
    assert attempt(again) and again.leading


def test_a_cold_candidate_leaves_a_free_lease_to_a_warm_one_for_the_window() -> None:
    """A replacement pod that has just started (its caches listing) and a standby racing
    for a lease the leader released: the standby takes it."""
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    assert attempt(a)
    cold, _ = candidate("pod-c", server, clock)
    cold.warm = lambda: False
    warm, _ = candidate("pod-b", server, clock)
    assert not attempt(cold) and not attempt(warm)
    assert asyncio.run(a.release())
    assert not attempt(cold), "cold: it leaves the free lease to a standby"
    assert attempt(warm)


def test_the_leader_gives_up_after_the_renew_deadline_without_the_api_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, lock = candidate("pod-a", server, clock)
    assert attempt(a)
    lock.down = True
    start = clock.t
    reason = asyncio.run(a.hold())
    assert reason.startswith("not renewed within 10s (0 Unreachable: ClientConnectorError")
    # One retry period to the round, then the renew deadline.
    assert clock.t - start == pytest.approx(2 + 10)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, "the same problem is warned about once"


def test_the_leader_keeps_the_lease_through_a_short_outage() -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, lock = candidate("pod-a", server, clock)
    assert attempt(a)

    async def outage() -> str | None:
        lock.down = True
        round_ = asyncio.ensure_future(a._renew_round())
        # Looked at every turn of the loop: the round's sleeps move the fake clock on.
        await wait_until_async(lambda: a.last_error, timeout=5, what="a failed renewal")
        clock.t += 6  # a few failed attempts' time
        lock.down = False
        return await round_

    assert asyncio.run(outage()) is None
    assert a.leading


def test_the_leader_gives_up_at_once_when_the_lease_names_another() -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    assert attempt(a)
    server.record = LeaseRecord("pod-b", 15, "x", "y", 1)  # e.g. pod-a's writes were lost
    server.version += 1
    start = clock.t
    assert asyncio.run(a.hold()) == "it is held by pod-b"
    assert clock.t - start == pytest.approx(2), "the first round, no renew deadline"


# -- the write fence (issue 34): no write from a replica whose Lease is not valid ----------


def test_each_renewal_opens_the_fence_for_the_renew_deadline_from_its_start() -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    b, _ = candidate("pod-b", server, clock)
    assert not a.fence.is_open() and not b.fence.is_open(), "shut before the first renewal"
    assert attempt(a) and not attempt(b)
    assert not b.fence.is_open(), "a standby writes nothing"
    opened = clock.t
    clock.t = opened + 9.99
    assert a.fence.is_open()
    clock.t = opened + 10
    assert not a.fence.is_open(), "the renew deadline: client-go's leader has given up by now"
    assert attempt(a) and a.fence.is_open(), "a renewal opens it again"


def test_a_leader_paused_past_its_lease_writes_nothing_and_finds_it_lost() -> None:
    """SIGSTOP for 25 s: the standby takes over; the resumed leader's fence is shut by its
    own clock before it has made a single request, and its renewal round shuts it for good."""
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    b, _ = candidate("pod-b", server, clock)
    assert attempt(a) and not attempt(b)
    paused = clock.t
    clock.t = paused + 15
    assert attempt(b) and b.fence.is_open()
    clock.t = paused + 25  # pod-a resumes
    assert not a.fence.is_open(), "shut on resuming, before any request"
    assert asyncio.run(a._renew_round()) == "it is held by pod-b"
    assert not a.fence.is_open() and not a.leading
    writes = [record.holder for _, record in server.writes]
    assert writes == ["pod-a", "pod-b"], "nothing written over pod-b's lease"


def test_a_deposed_leader_does_not_take_back_a_lease_it_finds_free() -> None:
    """Another replica led meanwhile and released the lease: what this one cached and
    expected is older than that replica's writes, so its round of leading is over."""
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    b, _ = candidate("pod-b", server, clock)
    assert attempt(a) and not attempt(b)
    clock.t += 15
    assert attempt(b)
    assert asyncio.run(b.release())
    clock.t += 1
    assert asyncio.run(a._renew_round()) == "it was taken"
    assert not a.fence.is_open() and not a.leading
    assert server.record is not None and server.record.holder == ""


def test_a_lone_leader_paused_past_its_lease_writes_again_once_it_has_renewed() -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    assert attempt(a)
    clock.t += 25  # no standby took it
    assert not a.fence.is_open()
    assert asyncio.run(a._renew_round()) is None
    assert a.fence.is_open() and a.leading


def test_releasing_the_lease_shuts_the_fence_first() -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    assert attempt(a)
    assert asyncio.run(a.release())
    assert not a.fence.is_open()


def test_a_renewal_that_hangs_is_cut_off_at_the_renew_deadline() -> None:
    """The real clock, tiny timings: a hung request does not keep a leader past its lease."""
    server = FakeLeaseServer()
    fast = LeaderElectionConfig(
        identity="pod-a",
        lease_duration_seconds=1,
        renew_deadline_seconds=0.3,
        retry_period_seconds=0.1,
    )
    lock = FakeLock(server)
    a = Elector(lock, fast, SystemClock())

    async def scenario() -> str:
        assert await a.try_acquire_or_renew()
        lock.hang = asyncio.Event()  # never set
        # Given up before the lease runs out: a TimeoutError here fails the test.
        return await asyncio.wait_for(a.hold(), fast.lease_duration_seconds)

    reason = asyncio.run(scenario())
    assert reason == "not renewed within 0.3s (no answer within 0.3s)"


class TimerStealingLock(FakeLock):
    """A request cut off as aiohttp may report it when its own timer fires in the same
    loop iteration as the deadline: an ApiError, the cancellation consumed; then a read
    that never answers."""

    async def update(self, record: LeaseRecord) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise ApiError(0, "Unreachable", "TimeoutError: ") from None

    async def get(self) -> LeaseRecord | None:
        await asyncio.Event().wait()
        return None


def test_no_request_outlives_the_attempts_deadline() -> None:
    clock = SystemClock()
    a = Elector(
        TimerStealingLock(FakeLeaseServer()),
        LeaderElectionConfig(identity="pod-a", **KCM_TIMINGS),
        clock,
    )
    a.observed = Observation(LeaseRecord("pod-a", 15), at=clock.monotonic())  # leading

    async def scenario() -> bool:
        # Over well within a second of its 0.2 s deadline: a TimeoutError fails the test.
        return await asyncio.wait_for(a.try_acquire_or_renew(0.2), 1.0)

    ok = asyncio.run(scenario())
    assert not ok
    assert a.last_error == "no answer within 0.2s"


def test_a_standby_stops_waiting_when_told() -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    b, _ = candidate("pod-b", server, clock)
    assert attempt(a)

    async def scenario() -> bool:
        stop = asyncio.Event()
        waiting = asyncio.ensure_future(b.acquire(stop))
        await wait_until_async(
            lambda: b.holder == "pod-a", timeout=5, what="the standby to see pod-a's lease"
        )
        stop.set()  # SIGTERM
        return await asyncio.wait_for(waiting, 5)

    assert asyncio.run(scenario()) is False
    assert not b.leading


# -- the real lock, through the operator's client, against an API server's Lease rules ----


class LeaseApi:
    """An API server's Lease endpoints over HTTP: 404, 409 AlreadyExists on a second
    create, 409 Conflict on a PUT of a stale resourceVersion."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self.puts: list[dict[str, Any]] = []
        self.app = web.Application()
        base = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
        self.app.router.add_get(base + "/{name}", self.get)
        self.app.router.add_post(base, self.create)
        self.app.router.add_put(base + "/{name}", self.update)

    @staticmethod
    def _status(code: int, reason: str) -> web.Response:
        body = {"kind": "Status", "code": code, "reason": reason, "message": reason}
        return web.json_response(body, status=code)

    async def get(self, request: web.Request) -> web.Response:
        lease = self.leases.get(request.match_info["name"])
        return web.json_response(lease) if lease else self._status(404, "NotFound")

    async def create(self, request: web.Request) -> web.Response:
        lease = await request.json()
        name = lease["metadata"]["name"]
        if name in self.leases:
            return self._status(409, "AlreadyExists")
        lease["metadata"]["resourceVersion"] = "1"
        self.leases[name] = lease
        return web.json_response(lease, status=201)

    async def update(self, request: web.Request) -> web.Response:
        lease = await request.json()
        self.puts.append(lease)
        stored = self.leases.get(request.match_info["name"])
        if stored is None:
            return self._status(404, "NotFound")
        version = stored["metadata"]["resourceVersion"]
        if lease["metadata"].get("resourceVersion") != version:
            return self._status(409, "Conflict")
        lease["metadata"]["resourceVersion"] = str(int(version) + 1)
        self.leases[request.match_info["name"]] = lease
        return web.json_response(lease)


class SteppedClock(FakeClock):
    """Virtual time for candidates that do real I/O: a sleep ends only when the test
    steps time to its end, so no time passes while a request is in flight, however
    slowly the machine answers it."""

    def __init__(self) -> None:
        super().__init__()
        self._sleeps: list[tuple[float, asyncio.Future[None]]] = []

    async def sleep(self, seconds: float) -> None:
        entry = (self.t + seconds, asyncio.get_running_loop().create_future())
        self._sleeps.append(entry)
        try:
            await entry[1]
        finally:
            self._sleeps.remove(entry)

    def sleeping(self) -> int:
        """The sleeps not yet over (a cancelled one is over)."""
        return sum(not wake.done() for _, wake in self._sleeps)

    def step(self) -> None:
        """Moves time to the end of the earliest sleep and ends every sleep due by then."""
        pending = [(at, wake) for at, wake in self._sleeps if not wake.done()]
        self.t = max(self.t, min(at for at, _ in pending))
        for at, wake in pending:
            if at <= self.t:
                wake.set_result(None)


def _micro_time_seconds(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def test_two_replicas_through_the_api(tmp_path: Path) -> None:
    """KubeLeaseLock over HTTP (the operator's Kube client), with client-go's timings on a
    clock that moves only while both candidates sleep: one leads, the other takes over a
    full lease after it last saw a renewal, once the leader stops renewing."""
    port = free_port()
    kubeconfig = local_kubeconfig(tmp_path / "kubeconfig", port)
    api = LeaseApi()
    clock = SteppedClock()
    lease = SETTINGS.lease_duration_seconds
    retry = SETTINGS.retry_period_seconds

    async def elector(identity: str) -> tuple[Elector, Kube]:
        kube = Kube(await load_configuration(str(kubeconfig)), concurrency=2)
        lock = KubeLeaseLock(kube, "paralleljob-system", "paralleljob-operator", timeout=lease)
        return Elector(lock, replace(SETTINGS, identity=identity), clock), kube

    async def asleep(count: int, *tasks: asyncio.Task[Any]) -> None:
        """Until ``count`` sleeps are pending (no request in flight) or a task has ended."""
        await wait_until_async(
            lambda: clock.sleeping() == count or any(task.done() for task in tasks),
            timeout=10,
            interval=0.001,
            what=f"{count} candidates asleep on the clock",
        )

    async def scenario() -> None:
        runner = web.AppRunner(api.app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        (a, kube_a), (b, kube_b) = await elector("pod-a"), await elector("pod-b")
        try:
            stop = asyncio.Event()
            assert await a.acquire(stop)
            holding = asyncio.create_task(a.hold())
            standby = asyncio.create_task(b.acquire(stop))
            # Three lease durations of renewals, each seen by the standby.
            end = clock.t + 3 * lease
            while clock.t < end and not (standby.done() or holding.done()):
                await asleep(2, standby, holding)
                clock.step()
            await asleep(2, standby, holding)
            assert not holding.done() and not standby.done() and b.holder == "pod-a"
            renewals = sum(put["spec"]["holderIdentity"] == "pod-a" for put in api.puts)
            assert renewals >= 3 * lease // retry
            holding.cancel()  # pod-a dies
            end = clock.t + 2 * lease
            while clock.t < end and not standby.done():
                await asleep(1, standby)
                if not standby.done():
                    clock.step()
            assert standby.done(), f"pod-b still standing by {2 * lease}s after pod-a died"
            assert standby.result()
            assert not await a.try_acquire_or_renew(), "pod-b's now, and not expired"
            assert await b.release()
            assert await a.try_acquire_or_renew(), "released: no wait"
        finally:
            for kube in (kube_a, kube_b):
                await kube.close()
            await runner.cleanup()

    asyncio.run(scenario())
    spec = api.leases["paralleljob-operator"]["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"], spec["leaseDurationSeconds"]) == (
        "pod-a",
        2,
        lease,
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", spec["renewTime"])
    assert all(put["metadata"].get("resourceVersion") for put in api.puts)
    # pod-b took the lease a full lease after pod-a's last renewal, and at most two polls
    # later (the renewal seen one poll late, the expiry found one poll late).
    holders = [put["spec"]["holderIdentity"] for put in api.puts]
    takeover = holders.index("pod-b")
    assert holders[takeover - 1] == "pod-a"
    waited = _micro_time_seconds(api.puts[takeover]["spec"]["acquireTime"]) - (
        _micro_time_seconds(api.puts[takeover - 1]["spec"]["renewTime"])
    )
    assert lease <= waited <= lease + 2 * retry, waited
