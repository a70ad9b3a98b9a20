"""Liveness that means progress: the pure stall rules, the job runtime's markers and the probe."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any, cast

import kopf
import pytest

from paralleljob import handlers
from paralleljob.controller import (
    EXPECTATIONS_TIMEOUT,
    Controller,
    ControllerConfig,
    JobRuntime,
)
from paralleljob.model import PodInfo
from paralleljob.progress import LoopClock, Stall, describe, stalls

# kopf's decorators type handlers as its ActivityFn; call it as the plain coroutine.
progress_probe = cast(Callable[..., Coroutine[Any, Any, dict[str, int]]], handlers.progress)

T = 180.0
JOB: dict[str, Any] = {
    "metadata": {"name": "j", "namespace": "ns", "uid": "u-1", "resourceVersion": "5"},
    "spec": {},
}


# -- the pure rules --------------------------------------------------------------------


def test_an_idle_loop_never_stalls() -> None:
    assert stalls({"ns/a": LoopClock()}, now=10_000.0, threshold=T) == []


def test_a_timer_in_the_future_is_not_pending_work() -> None:
    clock = LoopClock(timer_due=10_000.0 + 3600)  # e.g. the next DURATION refresh
    assert stalls({"ns/a": clock}, now=10_000.0, threshold=T) == []


@pytest.mark.parametrize(
    ("clock", "what"),
    [
        (LoopClock(woken_at=0.0), "due and not synced"),
        (LoopClock(timer_due=0.0), "due and not synced"),
        (LoopClock(sync_started=0.0), "sync running"),
        (LoopClock(unobserved_since=0.0), "pod change not seen by the pod watch"),
        (LoopClock(unechoed_since=0.0), "status write not seen by the job watch"),
    ],
)
def test_each_kind_of_pending_work_stalls_only_after_the_threshold(
    clock: LoopClock, what: str
) -> None:
    assert stalls({"ns/a": clock}, now=T, threshold=T) == []
    assert stalls({"ns/a": clock}, now=T + 1, threshold=T) == [Stall("ns/a", what, T + 1)]


def test_due_since_is_the_earlier_of_wake_and_timer() -> None:
    clock = LoopClock(woken_at=50.0, timer_due=20.0)
    [stall] = stalls({"ns/a": clock}, now=20.0 + T + 1, threshold=T)
    assert stall.seconds == T + 1


def test_stalls_come_oldest_first_and_the_message_is_one_line() -> None:
    clocks = {
        "ns/a": LoopClock(sync_started=100.0),
        "ns/b": LoopClock(woken_at=0.0),
        "ns/c": LoopClock(unobserved_since=50.0),
        "ns/d": LoopClock(unechoed_since=60.0),
        "ns/e": LoopClock(),
    }
    found = stalls(clocks, now=1000.0, threshold=T)
    assert [s.job for s in found] == ["ns/b", "ns/c", "ns/d", "ns/a"]
    text = describe(found)
    assert "\n" not in text
    assert text == (
        "no progress: ns/b: due and not synced for 1000s; "
        "ns/c: pod change not seen by the pod watch for 950s; "
        "ns/d: status write not seen by the job watch for 940s (and 1 more)"
    )


# -- the job runtime's markers ---------------------------------------------------------


def _runtime() -> JobRuntime:
    async def make() -> JobRuntime:
        return JobRuntime(JOB)

    return asyncio.run(make())


def test_a_poke_wakes_the_loop_and_keeps_the_first_wake_time() -> None:
    rt = _runtime()
    rt.poke()
    first = rt.woken_at
    assert first is not None and rt.wake.is_set()
    rt.poke()
    assert rt.woken_at == first


def test_unobserved_pod_changes_are_the_unsettled_expectations() -> None:
    rt = _runtime()
    rt.pending_creates["new"] = 10.0
    rt.pending_deletes["old"] = 20.0
    rt.pending_finalizer_removals["gone"] = 5.0  # released, then deleted: settled
    old = PodInfo("o", "old")
    assert rt.clock({"old": old}, now=30.0).unobserved_since == 10.0
    assert rt.clock({"new": PodInfo("n", "new"), "old": old}, now=30.0).unobserved_since == 20.0
    settled = {"new": PodInfo("n", "new"), "old": PodInfo("o", "old", deleting=True)}
    assert rt.clock(settled, now=30.0).unobserved_since is None
    assert rt.pending_creates == {"new": 10.0}, "the probe's view changes nothing"
    assert rt.clock({}, now=10.0 + EXPECTATIONS_TIMEOUT + 1).unobserved_since is None


def test_a_status_write_is_pending_until_the_job_watch_shows_it() -> None:
    rt = _runtime()
    rt.wrote("5", "7", now=100.0)
    assert rt.clock({}, now=101.0).unechoed_since == 100.0
    rt.wrote("7", "9", now=102.0)  # the oldest unechoed write counts
    rt.watched("6")
    assert rt.clock({}, now=103.0).unechoed_since == 100.0
    rt.watched("8")  # an event at or after the write: it came back
    assert rt.clock({}, now=103.0).unechoed_since is None


def test_writes_the_watch_cannot_echo_are_not_expected() -> None:
    rt = _runtime()
    rt.wrote("7", "7", now=1.0)  # the write changed nothing: no new version, no event
    assert rt.unechoed is None
    rt.watched("12")
    rt.wrote("10", "12", now=2.0)  # the watch showed it before the response arrived
    assert rt.unechoed is None


def test_a_sync_in_progress_is_marked_and_clears_the_wake() -> None:
    seen: list[tuple[float | None, float | None, float | None]] = []

    class Probe(Controller):
        async def sync_safely(self, rt: JobRuntime, pods_of: Any) -> float | None:
            seen.append((rt.woken_at, rt.timer_due, rt.sync_started))
            rt.poke()  # an event during the sync is pending work again
            return None

    async def run() -> JobRuntime:
        controller = Probe(kube=None, recorder=None, config=ControllerConfig())  # type: ignore[arg-type]
        rt = JobRuntime(JOB)
        rt.poke()
        rt.timer_due = 1.0
        await controller._timed_sync(rt, lambda uid: [])
        return rt

    rt = asyncio.run(run())
    [(woken, timer, started)] = seen
    assert woken is None and timer is None and started is not None
    assert rt.sync_started is None and rt.woken_at is not None


# -- the probe ---------------------------------------------------------------------------


def test_the_probe_fails_with_the_stalls_and_passes_otherwise() -> None:
    async def run() -> None:
        controller = Controller(
            kube=None,  # type: ignore[arg-type]
            recorder=None,  # type: ignore[arg-type]
            config=ControllerConfig(stall_seconds=60.0),
        )
        app = handlers.App()
        app.controller = controller
        memo = kopf.Memo(app=app)
        index: dict[str, list[PodInfo]] = {}
        assert await progress_probe(memo=memo, pods_by_job=index) == {"jobs": 0}
        rt = JobRuntime(JOB)
        controller.jobs[rt.uid] = rt
        assert await progress_probe(memo=memo, pods_by_job=index) == {"jobs": 1}
        rt.sync_started = time.monotonic() - 61  # a sync that has hung for a minute
        with pytest.raises(kopf.PermanentError, match=r"no progress: ns/j: sync running for"):
            await progress_probe(memo=memo, pods_by_job=index)

    asyncio.run(run())


def test_the_probe_passes_before_startup() -> None:
    result = asyncio.run(progress_probe(memo=kopf.Memo(), pods_by_job={}))
    assert result == {"jobs": 0}
