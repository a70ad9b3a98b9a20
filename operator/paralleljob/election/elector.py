"""Leader election on a ``coordination.k8s.io/v1`` Lease, so that of several replicas
exactly one acts: client-go's ``tools/leaderelection`` as kube-controller-manager runs it
(``--leader-elect``).

Every candidate polls the Lease, every retry period with client-go's jitter. It takes the
Lease when the Lease names no holder, or when the Lease has not changed for its
``leaseDurationSeconds``, timed by the candidate's own monotonic clock from when *it* saw
the last change (so the machines' clocks need not agree). Every write is a PUT of the
version it read (or a POST of a new Lease): of two candidates racing for it, one write
fails. The leader renews every retry period (a PUT of the version it last wrote, else a
GET and a PUT); when a round of renewals has not succeeded within the renew deadline, or
the Lease is no longer as this process wrote it (another holder, or released by one),
the leadership is lost and the process exits, as kube-controller-manager does; the
kubelet restarts it as a standby. Each renewal opens the write fence (fence.py) for the
renew deadline from when it started: what the operator writes asks it last, so that a
process paused past its Lease writes nothing when it resumes.

Why not ``kubernetes.aio.leaderelection`` (kubernetes 37.0.2), which the design note named:
it has the same loops, but (1) it sets no request timeout (the client's is 5 minutes) and
checks the renew deadline only between attempts, so a leader whose renewal hangs goes on
acting after its lease has expired and another replica has taken it; (2) only
``ApiException`` is caught, so a refused connection (an aiohttp error) escapes its loops
and ends ``run()`` without cancelling the leading coroutine or calling
``onstopped_leading``; (3) it writes local wall time, labelled UTC, as ``renewTime`` and
``acquireTime``; (4) ``LeaseLock`` logs a traceback for every lost create or update race
(409), which two replicas starting together meet on every fresh install; and (5) its
``LeaseLock`` needs a second client and session, outside the operator's request metrics.
Fixing that meant replacing the lock and wrapping every call; this module is the same
algorithm with those fixed, and its decisions are pure functions (core/lease.py).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Protocol, TypeVar

from ..config import LeaderElectionConfig
from ..core import (
    LeaseRecord,
    Observation,
    claim,
    held_by_another,
    is_leader,
    lease_valid,
    leaves_it_to_a_standby,
    observe,
    released,
    retry_delay,
    yield_window,
)
from ..json_types import JsonDict
from ..runtime.api import ApiError
from .fence import WriteFence, boot_clock
from .lease_lock import LeaseLock

log = logging.getLogger(__name__)

T = TypeVar("T")


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...

    def random(self) -> float: ...


class SystemClock:
    def monotonic(self) -> float:
        """The fence's clock (suspended time counts): the leader's own view of its Lease
        and the fence it opens must agree."""
        return boot_clock()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def random(self) -> float:
        return random.random()


class Elector:
    """client-go's ``LeaderElector`` for one candidate: ``acquire``, then ``hold`` while
    leading, ``release`` when done."""

    def __init__(
        self,
        lock: LeaseLock,
        config: LeaderElectionConfig,
        clock: Clock | None = None,
        warm: Callable[[], bool] = lambda: True,
        fence: WriteFence | None = None,
    ) -> None:
        if not config.identity:
            raise ValueError("leader election needs this candidate's identity")
        self.lock = lock
        self.config = config
        self.identity = config.identity
        self.clock: Clock = clock or SystemClock()
        #: Whether this candidate could act at once if it led (its caches in sync).
        self.warm = warm
        self.observed: Observation | None = None
        self.last_error = ""
        #: This process wrote the lease naming it: a lease naming this identity that it
        #: did not write is its pod's previous process's, which is gone.
        self._acquired = False
        #: When this process handed that lease over (monotonic).
        self._handed_over_at: float | None = None
        #: Opened for the renew deadline by each renewal, shut once the lease is lost:
        #: what the operator's writes ask (fence.py).
        self.fence = fence or WriteFence(self.clock.monotonic)
        #: The record this process last wrote as the holder.
        self._own: LeaseRecord | None = None

    @property
    def leading(self) -> bool:
        return self._acquired and is_leader(self.observed, self.identity)

    @property
    def transitions(self) -> int:
        """The Lease's leaseTransitions as this process last wrote it."""
        return self._own.transitions if self._own is not None else 0

    @property
    def holder(self) -> str:
        return self.observed.record.holder if self.observed is not None else ""

    def status(self) -> JsonDict:
        """What a standby's /healthz reports."""
        return {
            "lease": self.lock.describe,
            "identity": self.identity,
            "leading": self.leading,
            "holder": self.holder,
        }

    async def try_acquire_or_renew(self, timeout: float | None = None) -> bool:
        """tryAcquireOrRenew: one attempt; True when this candidate now holds the lease.
        Every request of the attempt is cut off ``timeout`` seconds from now, as
        client-go's context cuts them."""
        deadline = None if timeout is None else self.clock.monotonic() + timeout
        try:
            return await self._try_acquire_or_renew(deadline)
        except ApiError as exc:
            self._failed(exc)
        except TimeoutError:
            self.last_error = f"no answer within {timeout:.3g}s"
            log.debug("leader election: lease %s: %s", self.lock.describe, self.last_error)
        return False

    async def _io(self, call: Awaitable[T], deadline: float | None) -> T:
        """One request, cut off at ``deadline``: once that has passed, every further
        request of the attempt fails at once, whatever became of the first cut-off
        (aiohttp may report it as its own timeout, an ApiError here)."""
        if deadline is None:
            return await call
        async with asyncio.timeout(deadline - self.clock.monotonic()):
            return await call

    async def _try_acquire_or_renew(self, deadline: float | None) -> bool:
        # Before any request: whatever this attempt writes, the others see it later.
        now = self.clock.monotonic()
        duration = self.config.lease_duration_seconds
        # 1. The leader's fast path: write over the version it wrote last.
        if self.observed is not None and self.leading and lease_valid(self.observed, now):
            record = claim(self.identity, duration, self.clock.now(), self.observed.record, True)
            try:
                await self._io(self.lock.update(record), deadline)
            except ApiError as exc:
                log.debug("renewing lease %s failed (%s); reading it", self.lock.describe, exc)
            else:
                return self._took(record, now)
        # 2. Read it; create it if there is none.
        current = await self._io(self.lock.get(), deadline)
        if current is None:
            if self._acquired:
                return self._deposed(current)
            record = claim(self.identity, duration, self.clock.now(), None, False)
            await self._io(self.lock.create(record), deadline)
            return self._took(record, now)
        # 2b. A leader that finds the lease not as it wrote it has lost it, even if it is
        # free again: another replica led meanwhile, and wrote what this one has not seen.
        if self._acquired and not self._holds(current):
            return self._deposed(current)
        # 3. Someone else's, not expired: keep off.
        self.observed = observe(self.observed, current, self.clock.monotonic())
        if held_by_another(self.observed, self.identity, now):
            return False
        # 4. This pod's previous process's (a container restarted in place): handed over.
        if current.holder == self.identity and not self._acquired:
            await self._hand_over(current, deadline)
            return False
        # 5. Renew it (this candidate holds it), or take it over unless a warm standby may.
        if not self.leading and self._leaves_it_to_a_standby():
            return False
        record = claim(self.identity, duration, self.clock.now(), current, self.leading)
        await self._io(self.lock.update(record), deadline)
        return self._took(record, now)

    def _leaves_it_to_a_standby(self) -> bool:
        assert self.observed is not None
        return leaves_it_to_a_standby(
            self.observed,
            self.clock.monotonic(),
            warm=self.warm(),
            handed_over_at=self._handed_over_at,
            window=yield_window(self.config.retry_period_seconds),
        )

    async def _hand_over(self, current: LeaseRecord, deadline: float | None) -> None:
        """Releases the lease this pod's previous process held (the kubelet restarted its
        container), for a standby to take at its next look: a standby has its caches in
        sync, this process has just started listing (at 50,000 pods, resuming cold made
        a new job's first pod wait 23 s, issue 23)."""
        record = released(self.clock.now(), current)
        await self._io(self.lock.update(record), deadline)
        self.observed = Observation(record, self.clock.monotonic())
        self._handed_over_at = self.observed.at
        log.info(
            "lease %s names this pod, whose previous process is gone: released for a standby",
            self.lock.describe,
        )

    def _took(self, record: LeaseRecord, started: float) -> bool:
        """The attempt that ``started`` then wrote ``record``: the fence opens for the
        renew deadline from then (client-go's leader gives up by then; a standby waits
        the longer lease duration from when it saw this write, which came later)."""
        self.observed = Observation(record, self.clock.monotonic())
        self._acquired = True
        self._own = record
        self.last_error = ""
        self.fence.open_until(started + self.config.renew_deadline_seconds)
        return True

    def _holds(self, current: LeaseRecord) -> bool:
        """The lease is still the one this process took: its holder, since the same
        acquisition (a renewal keeps the acquire time; a takeover, even this process's
        own after a release, writes a new one)."""
        own = self._own
        return own is not None and (current.holder, current.acquire_time) == (
            own.holder,
            own.acquire_time,
        )

    def _deposed(self, current: LeaseRecord | None) -> bool:
        """The lease is lost: the fence shuts, and this round of leading is over (the
        campaign exits; even a lease found free is not taken back by the same round)."""
        self.fence.close()
        self._acquired = False
        if current is not None:
            self.observed = observe(self.observed, current, self.clock.monotonic())
        else:
            self.observed = None
        return False

    def _failed(self, exc: ApiError) -> None:
        message = str(exc)
        # A lost race (409) is part of the protocol; a new problem is worth a warning once.
        quiet = exc.conflict or message == self.last_error
        log.log(
            logging.DEBUG if quiet else logging.WARNING,
            "leader election: lease %s: %s",
            self.lock.describe,
            message,
        )
        self.last_error = message

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Polls until this candidate holds the lease (True) or ``stop`` is set (False)."""
        seen = ""
        while not stop.is_set():
            if await self.try_acquire_or_renew(self.config.renew_deadline_seconds):
                return True
            if self.holder != seen:
                seen = self.holder
                log.info(
                    "standing by: lease %s is held by %s (this is %s)",
                    self.lock.describe,
                    seen or "nobody",
                    self.identity,
                )
            delay = retry_delay(self.config.retry_period_seconds, self.clock.random())
            await _sleep_unless(self.clock, delay, stop)
        return False

    async def hold(self) -> str:
        """Renews the lease every retry period; returns, with the reason, once it is lost."""
        while True:
            await self.clock.sleep(self.config.retry_period_seconds)
            lost = await self._renew_round()
            if lost:
                return lost

    async def _renew_round(self) -> str | None:
        """Attempts, a retry period apart, until one succeeds (None) or the renew deadline
        has passed, or the lease names another holder (why it is lost)."""
        deadline = self.clock.monotonic() + self.config.renew_deadline_seconds
        while (remaining := deadline - self.clock.monotonic()) > 0:
            if await self.try_acquire_or_renew(remaining):
                return None
            if not self._acquired:
                return f"it is held by {self.holder}" if self.holder else "it was taken"
            wait = min(self.config.retry_period_seconds, deadline - self.clock.monotonic())
            await self.clock.sleep(max(0.0, wait))
        return (
            f"not renewed within {self.config.renew_deadline_seconds:g}s "
            f"({self.last_error or 'no reason given'})"
        )

    async def release(self) -> bool:
        """Gives the lease up, if this candidate still holds it, so that a standby need not
        wait for it to expire; True when released."""
        if not self.leading:
            return False
        deadline = self.clock.monotonic() + self.config.renew_deadline_seconds
        try:
            current = await self._io(self.lock.get(), deadline)
            if current is None:
                return False
            self.observed = observe(self.observed, current, self.clock.monotonic())
            if not self.leading:
                return False
            record = released(self.clock.now(), current)
            self.fence.close()  # nothing more goes out once a standby may take it
            await self._io(self.lock.update(record), deadline)
        except (ApiError, TimeoutError) as exc:
            log.warning("could not release lease %s: %s", self.lock.describe, exc or "timeout")
            return False
        self.observed = Observation(record, self.clock.monotonic())
        return True


async def _sleep_unless(clock: Clock, seconds: float, stop: asyncio.Event) -> None:
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sleeper, stopper):
            task.cancel()
