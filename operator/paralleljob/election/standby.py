"""The operator under a leader election: it stands by until its elector (elector.py) holds
the Lease, runs the operator while leading, and exits with status 1 at once when it loses
it, as kube-controller-manager does (the kubelet restarts it as a standby).

A standby makes no API call but its elector's, and answers ``/healthz`` (and ``/metrics``)
on the operator's ports, which it releases before kopf starts on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable

from aiohttp import web

from ..config import OperatorConfig
from ..json_types import JsonDict
from ..runtime import metrics
from ..runtime.api import ApiError
from ..runtime.kube import Kube, load_configuration, user_agent
from .elector import Elector
from .fence import WriteFence
from .fence_object import FenceObject
from .lease_lock import KubeLeaseLock

log = logging.getLogger(__name__)

#: Runs the operator until it stops by itself or ``stop`` is set: kopf.operator.
Lead = Callable[[asyncio.Event], Awaitable[None]]


async def campaign(
    elector: Elector,
    lead: Lead,
    *,
    stop: asyncio.Event,
    before_leading: Callable[[], Awaitable[None]],
    exit_now: Callable[[], None],
    name_leader: Callable[[], Awaitable[None]] | None = None,
) -> int:
    """Stands by until elected (or ``stop``), runs ``lead`` while leading; the exit status.

    ``before_leading`` frees what the operator needs (the standby's ports);
    ``name_leader`` names this replica in the Fence (fence_object.py) once it holds the
    Lease, before it leads. Losing the lease logs one line and calls ``exit_now`` (which
    does not return outside tests); the operator stopping by itself gives the lease up
    for a standby to take at once."""
    describe = elector.lock.describe
    try:
        acquired = await elector.acquire(stop)
    finally:
        await before_leading()
    if not acquired or stop.is_set():
        await elector.release()
        log.info("stopped while standing by for lease %s", describe)
        return 0
    log.info("acquired lease %s as %s", describe, elector.identity)
    # Started before the operator: kopf, when it stops, leaves the tasks it found alone.
    holder = asyncio.create_task(elector.hold(), name="leader election")
    if name_leader is not None:
        named = asyncio.create_task(_as_coroutine(name_leader()), name="fence")
        await asyncio.wait({holder, named}, return_when=asyncio.FIRST_COMPLETED)
        if holder.done():
            return await _lost(describe, holder, named, exit_now)
        named.result()
    leading = asyncio.create_task(_as_coroutine(lead(stop)), name="operator")
    await asyncio.wait({holder, leading}, return_when=asyncio.FIRST_COMPLETED)
    if holder.done():
        return await _lost(describe, holder, leading, exit_now)
    holder.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await holder
    if await elector.release():
        log.info("released lease %s", describe)
    leading.result()  # the operator's own failure, if any, as without an election
    return 0


async def _lost(
    describe: str,
    holder: asyncio.Task[str],
    acting: asyncio.Task[None],
    exit_now: Callable[[], None],
) -> int:
    log.error("lost lease %s: %s; exiting", describe, _why_lost(holder))
    exit_now()
    acting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await acting
    return 1


async def name_in_fence(elector: Elector, fence_object: FenceObject) -> None:
    """Until the Fence names this leader (fence_object.py), a retry period between
    attempts; while the Lease is held (campaign gives up on this once it is lost)."""
    failed = ""
    while True:
        try:
            named = await fence_object.claim(elector.identity, elector.transitions, elector.fence)
        except (ApiError, TimeoutError) as exc:
            if str(exc) != failed:
                log.warning("cannot name this leader in fence %s: %s", fence_object.describe, exc)
            failed = str(exc)
            await elector.clock.sleep(elector.config.retry_period_seconds)
            continue
        if named:
            log.info("fence %s names %s", fence_object.describe, elector.identity)
        else:
            log.info("no Fence kind is served: writes are fenced where they leave only")
        return


async def _as_coroutine(awaitable: Awaitable[None]) -> None:
    await awaitable


def _why_lost(holder: asyncio.Task[str]) -> str:
    if holder.cancelled():
        return "renewal cancelled"
    exc = holder.exception()
    return holder.result() if exc is None else f"renewal failed: {exc!r}"


def exit_at_once() -> None:
    """kube-controller-manager's ``klog.FlushAndExit(1)``: no clean-up, so that nothing
    more is written by a replica that is no longer the leader."""
    logging.shutdown()
    os._exit(1)


async def serve_standby(
    config: OperatorConfig, status: Callable[[], JsonDict]
) -> list[web.AppRunner]:
    """A standby's ``/healthz`` (always 200, with ``status()``) and ``/metrics``, on the
    address and ports the operator uses once it leads."""
    runners = []
    if config.liveness_port > 0:

        async def healthz(_: web.Request) -> web.Response:
            return web.json_response({"standby": status()})

        app = web.Application()
        app.router.add_get("/healthz", healthz)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, config.bind_address, config.liveness_port).start()
        runners.append(runner)
    if config.metrics_port > 0:
        runners.append(await metrics.serve(config.metrics_port, address=config.bind_address))
    return runners


async def run_elected(
    config: OperatorConfig,
    lead: Lead,
    warm: Callable[[], bool] = lambda: True,
    fence: WriteFence | None = None,
) -> int:
    """The operator under an election (config.leader_election); the exit status.
    ``warm``: whether the operator could act at once if it led (Elector.warm);
    ``fence``: what the operator's client asks before each write (fence.py)."""
    election = config.leader_election
    kube = Kube(await load_configuration(), concurrency=2, user_agent=user_agent(election.identity))
    # The client's own timeout only backs up the attempts' deadlines (at most the renew
    # deadline), which must fire first: a request cut off by it ends as an ApiError.
    lock = KubeLeaseLock(
        kube, election.namespace, election.lease_name, timeout=election.lease_duration_seconds
    )
    elector = Elector(lock, election, warm=warm, fence=fence)
    fence_object = FenceObject(kube, election.namespace, election.lease_name)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        # Until kopf, once leading, installs its own handlers (and also watches ``stop``).
        loop.add_signal_handler(sig, stop.set)
    runners = await serve_standby(config, elector.status)

    async def free_ports() -> None:
        for runner in runners:
            await runner.cleanup()

    log.info("leader election: standing by for lease %s as %s", lock.describe, elector.identity)
    try:
        return await campaign(
            elector,
            lead,
            stop=stop,
            before_leading=free_ports,
            exit_now=exit_at_once,
            name_leader=lambda: name_in_fence(elector, fence_object),
        )
    finally:
        await kube.close()
