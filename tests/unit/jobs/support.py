"""What the shell's tests share: a job, a refused call, a controller on a FakeApi, a
kubeconfig for a local HTTP server, leader-election candidates on an in-memory Lease."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiohttp import web

from paralleljob.config import ControllerConfig, LeaderElectionConfig
from paralleljob.core.job.model import parse_job
from paralleljob.core.lease import LeaseRecord
from paralleljob.election.elector import Elector
from paralleljob.jobs.controller import Controller
from paralleljob.jobs.job_runtime import JobRuntime
from paralleljob.jobs.job_sync import REAL_CLOCK, Clock, SyncReport
from paralleljob.runtime.api import ApiError
from tests.unit.fake_api import FakeApi, FakeRecorder

JOB: dict[str, Any] = {
    "apiVersion": "paralleljob.dev/v1alpha1",
    "kind": "ParallelJob",
    "metadata": {"name": "job", "namespace": "ns", "uid": "job-uid", "resourceVersion": "5"},
    "spec": {
        "completions": 3,
        "parallelism": 2,
        # As the operator's spec defaults left it (test_a_job_gets_the_api_server_s_...).
        "completionMode": "NonIndexed",
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}},
    },
}
REFUSED = ApiError(500, "InternalError", "etcdserver: request timed out")
#: The wall time of a FakeClock at 0 on its monotonic clock.
LEASE_EPOCH = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


async def no_sync(rt: JobRuntime) -> SyncReport:
    return SyncReport(delay=None)


def use_api(controller: Controller, api: FakeApi) -> None:
    """Points every collaborator of ``controller`` at ``api`` (one FakeApi holds one
    job): several jobs' syncs then share one controller's budgets."""
    controller.pods.api = controller.status.api = controller.syncer.api = api
    controller.syncer.pods_of = controller.pods_of = api.pods_of


@dataclass
class HeldClock:
    """Time that moves only when the test moves it, the wall clock (DURATION, start
    times) and the monotonic one (the budgets) together; it starts mid-second, so that
    moving it less than half a second changes no whole-second DURATION."""

    wall: datetime = field(default_factory=lambda: datetime(2026, 1, 1, 12, 0, 0, 500_000, UTC))
    mono: float = 1000.0

    def advance(self, seconds: float) -> None:
        self.wall += timedelta(seconds=seconds)
        self.mono += seconds

    @property
    def clock(self) -> Clock:
        return Clock(now=lambda: self.wall, monotonic=lambda: self.mono)


def controller_for(api: FakeApi, clock: Clock = REAL_CLOCK, **config: Any) -> Controller:
    return Controller(
        api,
        FakeRecorder(),
        ControllerConfig(**{"sync_batch_seconds": 0.0, **config}),
        api.pods_of,
        clock=clock,
        job_exists=lambda uid: uid == api.job["metadata"]["uid"],
    )


async def until(what: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not what():
            await asyncio.sleep(0.005)


def keeps(rt: JobRuntime, body: Mapping[str, Any]) -> bool:
    """Whether ``rt`` keeps ``body``'s version: its resourceVersion, its spec and its
    parse (the runtime keeps a compact record, not the body)."""
    return (
        rt.resource_version == body["metadata"]["resourceVersion"]
        and rt.body.get("spec") == body.get("spec")
        and rt.job == parse_job(body)
    )


def job_named(uid: str) -> dict[str, Any]:
    return {**JOB, "metadata": {**JOB["metadata"], "uid": uid, "name": f"job-{uid}"}}


def local_kubeconfig(path: Path, port: int) -> Path:
    """A kubeconfig for a plain-HTTP server on 127.0.0.1:``port``, with a token."""
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: t0ken}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return path


# -- leader election: candidates on an in-memory Lease ------------------------------------


class FakeClock:
    """Time moves only when a candidate sleeps, or the test advances it."""

    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t

    def now(self) -> datetime:
        return LEASE_EPOCH + timedelta(seconds=self.t)

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


def candidate(name: str, server: FakeLeaseServer, clock: Any) -> tuple[Elector, FakeLock]:
    lock = FakeLock(server)
    return Elector(lock, LeaderElectionConfig(identity=name, **KCM_TIMINGS), clock), lock


def attempt(elector: Elector) -> bool:
    return asyncio.run(elector.try_acquire_or_renew())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def serving(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]], kubeconfig: Path
) -> AsyncIterator[Path]:
    """An HTTP server on loopback answering every path with ``handler``, and
    ``kubeconfig`` written for it (yielded); stopped on the way out."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield local_kubeconfig(kubeconfig, port)
    finally:
        await runner.cleanup()
