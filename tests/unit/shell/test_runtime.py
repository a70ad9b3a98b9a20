"""A job's runtime (runtime.py) and its parts: the newest version kept, the loop's wake,
the liveness clock, status writes the watch owes."""

from __future__ import annotations

from paralleljob.core.model import (
    PodInfo,
)
from paralleljob.shell.job_loops import loop_clock
from paralleljob.shell.runtime import JobRuntime

from .support import JOB


# -- the job runtime -------------------------------------------------------------------
def test_runtime_keeps_the_newest_job_version() -> None:
    rt = JobRuntime(JOB)
    newer = {**JOB, "metadata": {**JOB["metadata"], "resourceVersion": "9"}}
    older = {**JOB, "metadata": {**JOB["metadata"], "resourceVersion": "7"}}
    other = {**JOB, "metadata": {**JOB["metadata"], "uid": "u-2", "resourceVersion": "99"}}
    assert rt.offer(newer) and rt.body is newer
    assert not rt.offer(older) and rt.body is newer
    assert not rt.offer(other) and rt.body is newer


def test_a_poke_wakes_the_loop_and_keeps_the_first_wake_time() -> None:
    ticks = iter([1.0, 2.0])
    rt = JobRuntime(JOB, lambda: next(ticks))
    rt.loop.poke()
    rt.loop.poke()
    assert rt.loop.woken and rt.loop.woken_at == 1.0


def test_the_loop_clock_shows_the_unsettled_expectations() -> None:
    rt = JobRuntime(JOB)
    rt.pods.expectations.expect_creation("new", 10.0)
    assert loop_clock(rt, {}, now=30.0).unobserved_since == 10.0
    assert loop_clock(rt, {"new": PodInfo("n", "new")}, now=30.0).unobserved_since is None


def test_a_status_write_is_pending_until_the_job_watch_shows_it() -> None:
    rt = JobRuntime(JOB)
    rt.status.wrote("5", "7", now=100.0)
    assert loop_clock(rt, {}, now=101.0).unechoed_since == 100.0
    rt.status.wrote("7", "9", now=102.0)  # the oldest unechoed write counts
    rt.status.watched("6")
    assert loop_clock(rt, {}, now=103.0).unechoed_since == 100.0
    rt.status.watched("8")  # an event at or after the write: it came back
    assert loop_clock(rt, {}, now=103.0).unechoed_since is None


def test_writes_the_watch_cannot_echo_are_not_expected() -> None:
    rt = JobRuntime(JOB)
    rt.status.wrote("7", "7", now=1.0)  # the write changed nothing: no new version, no event
    assert rt.status.unechoed is None
    rt.status.watched("12")
    rt.status.wrote("10", "12", now=2.0)  # the watch showed it before the response arrived
    assert rt.status.unechoed is None
