"""Leader election (leader.py): its settings, its pure decisions, and the elector's loops
against an in-memory Lease with resourceVersion semantics (no API server)."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
import yaml
from aiohttp import web

from paralleljob import config as config_module
from paralleljob.cli import StartupError, _check_lease, parse_args
from paralleljob.config import LeaderElectionConfig, OperatorConfig, own_identity, own_namespace
from paralleljob.shell.api import ApiError
from paralleljob.shell.kube import Kube, load_configuration
from paralleljob.shell.leader import (
    Elector,
    KubeLeaseLock,
    LeaseRecord,
    Observation,
    SystemClock,
    campaign,
    claim,
    free_since,
    held_by_another,
    lease_valid,
    leaves_it_to_a_standby,
    micro_time,
    observe,
    record_of,
    released,
    retry_delay,
    serve_standby,
    spec_of,
    yield_window,
)
from tests.support.wait import wait_until_async

from .support import local_kubeconfig

REPO = Path(__file__).resolve().parents[3]
ENV = (
    "PJ_LEADER_ELECT",
    "PJ_LEADER_ELECTION_NAMESPACE",
    "PJ_LEADER_ELECTION_LEASE_NAME",
    "PJ_LEADER_ELECTION_LEASE_DURATION_SECONDS",
    "PJ_LEADER_ELECTION_RENEW_DEADLINE_SECONDS",
    "PJ_LEADER_ELECTION_RETRY_PERIOD_SECONDS",
    "POD_NAME",
    "POD_NAMESPACE",
)


@pytest.fixture(autouse=True)
def no_pod(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Not in a pod: no downward-API variables, no service account namespace file."""
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    missing = tmp_path / "serviceaccount" / "namespace"
    monkeypatch.setattr(config_module, "SERVICE_ACCOUNT_NAMESPACE_FILE", missing)
    return missing


# -- settings ----------------------------------------------------------------------------


def test_defaults_fail_over_in_under_15_seconds() -> None:
    election = parse_args([]).leader_election
    assert election.enabled is True
    assert (election.namespace, election.lease_name) == (
        "paralleljob-system",
        "paralleljob-operator",
    )
    assert (
        election.lease_duration_seconds,
        election.renew_deadline_seconds,
        election.retry_period_seconds,
    ) == (9, 6.0, 1.0)
    assert election.identity == f"{socket.gethostname()}_{os.getpid()}"
    assert election == LeaderElectionConfig(identity=election.identity)


def test_in_a_pod_the_identity_is_the_pods_name_and_the_lease_in_its_namespace(
    monkeypatch: pytest.MonkeyPatch, no_pod: Path
) -> None:
    no_pod.parent.mkdir()
    no_pod.write_text("from-service-account\n")
    assert parse_args([]).leader_election.namespace == "from-service-account"
    monkeypatch.setenv("POD_NAME", "paralleljob-operator-7d9f-abcde")
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    election = parse_args([]).leader_election
    assert (election.identity, election.namespace) == ("paralleljob-operator-7d9f-abcde", "ops")
    monkeypatch.setenv("PJ_LEADER_ELECTION_NAMESPACE", "elsewhere")
    monkeypatch.setenv("PJ_LEADER_ELECTION_LEASE_NAME", "pj-leader")
    election = parse_args([]).leader_election
    assert (election.namespace, election.lease_name) == ("elsewhere", "pj-leader")


@pytest.mark.parametrize(
    ("environ", "expected"),
    [({}, "host_42"), ({"POD_NAME": " "}, "host_42"), ({"POD_NAME": "pod-a"}, "pod-a")],
)
def test_own_identity(environ: dict[str, str], expected: str) -> None:
    assert own_identity(environ, "host", 42) == expected


@pytest.mark.parametrize(
    ("environ", "account", "expected"),
    [
        ({}, None, ""),
        ({}, "sa-ns\n", "sa-ns"),
        ({"POD_NAMESPACE": "pod-ns"}, "sa-ns", "pod-ns"),
        ({"POD_NAMESPACE": ""}, "sa-ns", "sa-ns"),
    ],
)
def test_own_namespace(environ: dict[str, str], account: str | None, expected: str) -> None:
    assert own_namespace(environ, account) == expected


@pytest.mark.parametrize(
    ("raw", "enabled"),
    [("false", False), ("0", False), ("OFF", False), ("no", False), ("true", True), ("", True)],
)
def test_leader_elect_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, raw: str, enabled: bool
) -> None:
    monkeypatch.setenv("PJ_LEADER_ELECT", raw)
    assert parse_args([]).leader_election.enabled is enabled


def test_the_flag_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PJ_LEADER_ELECT", "true")
    assert parse_args(["--no-leader-elect"]).leader_election.enabled is False
    monkeypatch.setenv("PJ_LEADER_ELECT", "false")
    assert parse_args(["--leader-elect"]).leader_election.enabled is True


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PJ_LEADER_ELECT": "maybe"}, "PJ_LEADER_ELECT must be true or false, got 'maybe'"),
        (
            {"PJ_LEADER_ELECTION_LEASE_DURATION_SECONDS": "1.5"},
            "PJ_LEADER_ELECTION_LEASE_DURATION_SECONDS must be an integer, got '1.5'",
        ),
        (
            {"PJ_LEADER_ELECTION_RETRY_PERIOD_SECONDS": "0"},
            "PJ_LEADER_ELECTION_RETRY_PERIOD_SECONDS must be at least 0.1, got '0'",
        ),
        (
            {"PJ_LEADER_ELECTION_LEASE_DURATION_SECONDS": "6"},
            "PJ_LEADER_ELECTION_LEASE_DURATION_SECONDS (6) must be greater than "
            "PJ_LEADER_ELECTION_RENEW_DEADLINE_SECONDS (6)",
        ),
        (
            {"PJ_LEADER_ELECTION_RETRY_PERIOD_SECONDS": "5"},
            "PJ_LEADER_ELECTION_RENEW_DEADLINE_SECONDS (6) must be greater than 1.2 x "
            "PJ_LEADER_ELECTION_RETRY_PERIOD_SECONDS (5)",
        ),
    ],
)
def test_bad_election_settings_are_one_line_naming_them(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    env: dict[str, str],
    message: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exc:
        parse_args([])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_shorter_timings_for_tests_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PJ_LEADER_ELECTION_LEASE_DURATION_SECONDS", "4")
    monkeypatch.setenv("PJ_LEADER_ELECTION_RENEW_DEADLINE_SECONDS", "3")
    monkeypatch.setenv("PJ_LEADER_ELECTION_RETRY_PERIOD_SECONDS", "1")
    election = parse_args([]).leader_election
    assert (election.lease_duration_seconds, election.renew_deadline_seconds) == (4, 3.0)
    assert election.retry_period_seconds == 1.0


class FakeKube:
    """Answers the start-up check's GETs: path -> the ApiError to raise (else 200)."""

    def __init__(self, errors: dict[str, ApiError]) -> None:
        self.errors = errors
        self.paths: list[str] = []

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        assert method == "GET"
        self.paths.append(path)
        if path in self.errors:
            raise self.errors[path]
        return {}


NS_PATH = "/api/v1/namespaces/paralleljob-system"
LEASE_PATH = (
    "/apis/coordination.k8s.io/v1/namespaces/paralleljob-system/leases/paralleljob-operator"
)


def _check(errors: dict[str, ApiError]) -> list[str]:
    kube = FakeKube(errors)
    asyncio.run(_check_lease(cast(Kube, kube), LeaderElectionConfig(identity="x")))
    return kube.paths


def test_the_start_up_check_reads_the_lease_namespace_and_lease() -> None:
    assert _check({}) == [NS_PATH, LEASE_PATH]
    assert _check({LEASE_PATH: ApiError(404, "NotFound", "not found")}) == [NS_PATH, LEASE_PATH]


@pytest.mark.parametrize(
    ("errors", "message"),
    [
        (
            {NS_PATH: ApiError(404, "NotFound", "namespaces not found")},
            "namespace 'paralleljob-system' of the leader-election lease does not exist "
            "(set PJ_LEADER_ELECTION_NAMESPACE, or PJ_LEADER_ELECT=false to run alone)",
        ),
        (
            {LEASE_PATH: ApiError(403, "Forbidden", "cannot get resource leases")},
            "cannot read lease paralleljob-system/paralleljob-operator: "
            "403 Forbidden: cannot get resource leases",
        ),
    ],
)
def test_the_start_up_check_fails_in_one_line(errors: dict[str, ApiError], message: str) -> None:
    with pytest.raises(StartupError) as exc:
        _check(errors)
    assert str(exc.value) == message


def test_an_elector_needs_an_identity() -> None:
    with pytest.raises(ValueError, match="identity"):
        Elector(FakeLock(FakeLeaseServer()), LeaderElectionConfig())


# -- pure decisions ----------------------------------------------------------------------

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def test_lease_spec_round_trip_and_micro_time() -> None:
    assert micro_time(T0) == "2026-01-02T03:04:05.678901Z"
    assert micro_time(T0.replace(microsecond=0)) == "2026-01-02T03:04:05.000000Z"
    record = LeaseRecord("pod-a", 15, micro_time(T0), micro_time(T0), 3)
    assert record_of({"spec": spec_of(record)}) == record
    assert record_of({}) == LeaseRecord()
    assert spec_of(LeaseRecord("", 1)) == {
        "holderIdentity": "",
        "leaseDurationSeconds": 1,
        "leaseTransitions": 0,
    }


def test_the_observation_time_moves_only_when_the_record_changes() -> None:
    a = LeaseRecord("pod-a", 15, "t0", "t0")
    first = observe(None, a, now=100.0)
    assert observe(first, a, now=110.0) is first
    renewed = LeaseRecord("pod-a", 15, "t0", "t1")
    assert observe(first, renewed, now=110.0) == Observation(renewed, 110.0)


def test_a_lease_is_valid_for_its_own_duration_since_it_was_seen_to_change() -> None:
    seen = Observation(LeaseRecord("pod-a", 15), at=100.0)
    assert lease_valid(seen, 114.9)
    assert not lease_valid(seen, 115.0)
    assert not lease_valid(None, 0.0)
    assert held_by_another(seen, "pod-b", 114.9)
    assert not held_by_another(seen, "pod-b", 115.0)
    assert not held_by_another(seen, "pod-a", 100.0), "its own"
    released_lease = Observation(LeaseRecord("", 1), at=100.0)
    assert not held_by_another(released_lease, "pod-b", 100.0), "nobody's"


def test_claim_renews_or_takes_over() -> None:
    later = T0 + timedelta(seconds=2)
    new = claim("pod-a", 15, T0, None, leading=False)
    assert new == LeaseRecord("pod-a", 15, micro_time(T0), micro_time(T0), 0)
    renewed = claim("pod-a", 15, later, new, leading=True)
    assert renewed == LeaseRecord("pod-a", 15, micro_time(T0), micro_time(later), 0)
    taken = claim("pod-b", 15, later, renewed, leading=False)
    assert taken == LeaseRecord("pod-b", 15, micro_time(later), micro_time(later), 1)
    assert released(later, taken) == LeaseRecord("", 1, micro_time(later), micro_time(later), 1)


def test_retry_delay_is_client_gos_jitter() -> None:
    assert retry_delay(2.0, 0.0) == 2.0
    assert retry_delay(2.0, 0.5) == pytest.approx(3.2)
    assert retry_delay(2.0, 0.999999) == pytest.approx(4.4, abs=1e-5)


# -- the elector against an in-memory Lease ------------------------------------------------


class FakeClock:
    """Time moves only when a candidate sleeps, or the test advances it."""

    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t

    def now(self) -> datetime:
        return T0 + timedelta(seconds=self.t)

    async def sleep(self, seconds: float) -> None:
        self.t += seconds
        await asyncio.sleep(0)

    def random(self) -> float:
        return 0.0


class FakeLeaseServer:
    """The one Lease, with resourceVersion semantics."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.version = 0
        self.writes: list[tuple[str, LeaseRecord]] = []


class FakeLock:
    """One candidate's view of the Lease: it writes over the version it last saw."""

    describe = "paralleljob-system/paralleljob-operator"

    def __init__(self, server: FakeLeaseServer) -> None:
        self.server = server
        self.seen: int | None = None
        self.down = False
        self.hang: asyncio.Event | None = None

    async def _call(self) -> None:
        if self.hang is not None:
            await self.hang.wait()
        if self.down:
            raise ApiError(0, "Unreachable", "ClientConnectorError: connection refused")

    async def get(self) -> LeaseRecord | None:
        await self._call()
        self.seen = self.server.version if self.server.record is not None else None
        return self.server.record

    async def create(self, record: LeaseRecord) -> None:
        await self._call()
        if self.server.record is not None:
            raise ApiError(409, "AlreadyExists", "leases.coordination.k8s.io already exists")
        self._write("create", record)

    async def update(self, record: LeaseRecord) -> None:
        await self._call()
        if self.seen != self.server.version:
            raise ApiError(409, "Conflict", "the object has been modified")
        self._write("update", record)

    def _write(self, verb: str, record: LeaseRecord) -> None:
        self.server.record = record
        self.server.version += 1
        self.server.writes.append((verb, record))
        self.seen = self.server.version


#: The elector tests run client-go's (kube-controller-manager's) timings, whatever the
#: operator's defaults: 15 s lease, 10 s renew deadline, 2 s retry period.
KCM_TIMINGS: dict[str, Any] = {
    "lease_duration_seconds": 15,
    "renew_deadline_seconds": 10.0,
    "retry_period_seconds": 2.0,
}
SETTINGS = LeaderElectionConfig(**KCM_TIMINGS)


def candidate(name: str, server: FakeLeaseServer, clock: Any) -> tuple[Elector, FakeLock]:
    lock = FakeLock(server)
    return Elector(lock, LeaderElectionConfig(identity=name, **KCM_TIMINGS), clock), lock


def attempt(elector: Elector) -> bool:
    return asyncio.run(elector.try_acquire_or_renew())


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


@pytest.mark.parametrize(
    ("warm", "handed_over_at", "now", "expected"),
    [
        (True, None, 1000.0, False),  # warm: takes it at once
        (False, None, 1000.0, True),  # cold, the lease free since 995
        (False, None, 1003.8, False),  # cold, and nobody took it within the window (8.8 s)
        (True, 999.0, 1000.0, True),  # warm, but it has just handed it over
        (True, 999.0, 1007.8, False),
    ],
)
def test_leaves_it_to_a_standby(
    warm: bool, handed_over_at: float | None, now: float, expected: bool
) -> None:
    released_at = Observation(LeaseRecord("", 1, "t", "t", 3), 995.0)
    assert (
        leaves_it_to_a_standby(
            released_at, now, warm=warm, handed_over_at=handed_over_at, window=8.8
        )
        is expected
    )


def test_an_expired_lease_is_free_from_its_expiry() -> None:
    held = Observation(LeaseRecord("pod-a", 15, "t", "t", 0), 100.0)
    assert free_since(held) == 115.0
    assert free_since(Observation(LeaseRecord("", 1, "t", "t", 0), 100.0)) == 100.0


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

    async def scenario() -> tuple[str, float]:
        assert await a.try_acquire_or_renew()
        lock.hang = asyncio.Event()  # never set
        loop = asyncio.get_running_loop()
        start = loop.time()
        reason = await asyncio.wait_for(a.hold(), 5)
        return reason, loop.time() - start

    reason, took = asyncio.run(scenario())
    assert reason == "not renewed within 0.3s (no answer within 0.3s)"
    assert took < fast.lease_duration_seconds


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

    async def scenario() -> tuple[bool, float]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        ok = await asyncio.wait_for(a.try_acquire_or_renew(0.2), 5)
        return ok, loop.time() - start

    ok, took = asyncio.run(scenario())
    assert not ok and took < 1.0, took
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
    port = _free_port()
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


# -- the campaign: stand by, lead, exit ---------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []

    async def ports_freed(self) -> None:
        self.events.append("ports freed")

    def exit_now(self) -> None:
        self.events.append("exit")


def test_campaign_leads_once_elected_and_releases_when_the_operator_stops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    seen = Recorder()

    async def lead(stop: asyncio.Event) -> None:
        seen.events.append(f"leading (holder {server.record.holder if server.record else ''})")

    status = asyncio.run(
        campaign(
            a,
            lead,
            stop=asyncio.Event(),
            before_leading=seen.ports_freed,
            exit_now=seen.exit_now,
        )
    )
    assert status == 0
    assert seen.events == ["ports freed", "leading (holder pod-a)"]
    assert server.record is not None and server.record.holder == "", "released"
    assert f"acquired lease {FakeLock.describe} as pod-a" in caplog.text
    assert f"released lease {FakeLock.describe}" in caplog.text


def test_campaign_exits_when_the_lease_is_lost(caplog: pytest.LogCaptureFixture) -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, lock = candidate("pod-a", server, clock)
    seen = Recorder()

    async def lead(stop: asyncio.Event) -> None:
        seen.events.append("leading")
        lock.down = True
        try:
            await asyncio.Event().wait()  # the operator runs until it is stopped
        except asyncio.CancelledError:
            seen.events.append("operator cancelled")
            raise

    status = asyncio.run(
        campaign(
            a, lead, stop=asyncio.Event(), before_leading=seen.ports_freed, exit_now=seen.exit_now
        )
    )
    assert status == 1
    assert seen.events == ["ports freed", "leading", "exit", "operator cancelled"]
    lost = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert lost == [
        f"lost lease {FakeLock.describe}: not renewed within 10s "
        "(0 Unreachable: ClientConnectorError: connection refused); exiting"
    ]


def test_campaign_stopped_while_standing_by_never_leads() -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    b, _ = candidate("pod-b", server, clock)
    assert attempt(a)
    seen = Recorder()

    async def lead(stop: asyncio.Event) -> None:
        seen.events.append("leading")

    async def scenario() -> int:
        stop = asyncio.Event()
        stop.set()  # SIGTERM before the lease was ever free
        return await campaign(
            b, lead, stop=stop, before_leading=seen.ports_freed, exit_now=seen.exit_now
        )

    assert asyncio.run(scenario()) == 0
    assert seen.events == ["ports freed"]
    assert server.record is not None and server.record.holder == "pod-a"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_standby_answers_healthz_and_metrics_then_frees_the_ports() -> None:
    liveness, metrics_port = _free_port(), _free_port()
    config = OperatorConfig(
        bind_address="127.0.0.1", liveness_port=liveness, metrics_port=metrics_port
    )

    async def scenario() -> tuple[int, Any, int]:
        status = {"lease": "ns/name", "leading": False, "holder": "pod-a"}
        runners = await serve_standby(config, lambda: status)
        try:
            # On the bind address only (--bind-address), not on every interface.
            assert [runner.addresses for runner in runners] == [
                [("127.0.0.1", liveness)],
                [("127.0.0.1", metrics_port)],
            ]
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://127.0.0.1:{liveness}/healthz") as r:
                    health = (r.status, await r.json())
                async with session.get(f"http://127.0.0.1:{metrics_port}/metrics") as r:
                    scraped = r.status
        finally:
            for runner in runners:
                await runner.cleanup()
        return health[0], health[1], scraped

    code, body, scraped = asyncio.run(scenario())
    assert (code, scraped) == (200, 200)
    assert body == {"standby": {"lease": "ns/name", "leading": False, "holder": "pod-a"}}
    for port in (liveness, metrics_port):  # free for kopf and the operator's metrics
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's servers
            sock.bind((config.bind_address, port))


# -- the manifests (tests/deploy checks them on a cluster) --------------------------------


def _manifests() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted((REPO / "manifests").glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def _one(kind: str) -> dict[str, Any]:
    [found] = [d for d in _manifests() if d["kind"] == kind]
    return found


def test_the_deployment_runs_two_replicas_apart_with_their_pod_names() -> None:
    deployment = _one("Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    env = {
        e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        for e in container["env"]
    }
    assert env["POD_NAME"] == "metadata.name"
    assert env["POD_NAMESPACE"] == "metadata.namespace"
    # Not in config.env: no deploy's configuration turns the election off.
    assert {"name": "PJ_LEADER_ELECT", "value": "true"} in container["env"]
    assert "PJ_LEADER_ELECT" not in (REPO / "manifests" / "config.env").read_text()
    [preferred] = pod["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    term = preferred["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]


def test_a_disruption_budget_keeps_one_replica() -> None:
    budget = _one("PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1
    deployment = _one("Deployment")
    assert (
        budget["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    )
    assert budget["metadata"]["namespace"] == deployment["metadata"]["namespace"]


def test_the_lease_role_grants_exactly_get_create_update_on_leases() -> None:
    role = _one("Role")
    assert role["metadata"]["namespace"] == "paralleljob-system"
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "create", "update"],
        }
    ]
    binding = _one("RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": "paralleljob-operator",
            "namespace": "paralleljob-system",
        }
    ]
