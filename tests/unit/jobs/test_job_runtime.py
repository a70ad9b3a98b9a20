"""A job's runtime (runtime.py) and its parts: the newest version kept, the loop's wake,
the liveness clock, status writes the watch owes."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import pytest

from paralleljob.core.job.kind import PARALLELJOB
from paralleljob.core.job.model import (
    PodInfo,
    parse_job,
)
from paralleljob.core.job.pods import new_pod_bodies
from paralleljob.core.job.sync import PodPlan
from paralleljob.jobs.job_loops import loop_clock
from paralleljob.jobs.job_runtime import JobRuntime
from tests.support.footprint import LAST_APPLIED, job_body, record_bytes, wire
from tests.unit.jobs.support import JOB, keeps


# -- the job runtime -------------------------------------------------------------------
def test_runtime_keeps_the_newest_job_version() -> None:
    rt = JobRuntime(JOB)
    newer = {**JOB, "metadata": {**JOB["metadata"], "resourceVersion": "9"}}
    older = {**JOB, "metadata": {**JOB["metadata"], "resourceVersion": "7"}}
    other = {**JOB, "metadata": {**JOB["metadata"], "uid": "u-2", "resourceVersion": "99"}}
    assert rt.offer(newer) and keeps(rt, newer)
    assert not rt.offer(older) and keeps(rt, newer)
    assert not rt.offer(other) and keeps(rt, newer)


def _pods(body: Mapping[str, Any], plan: PodPlan) -> list[dict[str, Any]]:
    pods = new_pod_bodies(body, parse_job(body), plan, PARALLELJOB)
    return [next(pods) for _ in range(plan.create)]


@pytest.mark.parametrize("indexed", [False, True], ids=["NonIndexed", "Indexed"])
def test_the_record_keeps_no_managed_fields_and_no_last_applied_configuration(
    indexed: bool,
) -> None:
    """A watch event's body, as the API server sends it: the runtime keeps what the
    operator reads of it (upstream's informer transform strips managedFields), and
    parses and builds pods from that exactly as from the body."""
    body = json.loads(wire(job_body(7, typical=True)))
    if indexed:
        body["spec"]["completionMode"] = "Indexed"
    assert body["metadata"]["managedFields"] and LAST_APPLIED in body["metadata"]["annotations"]
    rt = JobRuntime(copy.deepcopy(body))
    newer = copy.deepcopy(body)
    newer["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
    for kept in (body, newer):
        rt.offer(copy.deepcopy(kept))
        meta = rt.body["metadata"]
        assert "managedFields" not in meta and "annotations" not in meta
        assert LAST_APPLIED not in json.dumps(rt.body)
        assert keeps(rt, kept)
        plan = PodPlan(create=2, create_indexes=(0, 3) if indexed else ())
        assert _pods(rt.body, plan) == _pods(kept, plan)
    assert rt.job.status.active == 5 and rt.job.status.containers_text == "worker,uploader"


@pytest.mark.parametrize(
    ("typical", "most"),
    [(False, 3_000), (True, 16_000)],
    ids=["the bench's 3 KB job", "a 34 KB typical template"],
)
def test_a_job_record_keeps_a_fraction_of_the_body(typical: bool, most: int) -> None:
    """Bytes kept per job of a body as the API server returns it, its parse included,
    the body itself gone (tests/support/footprint.py): 19.3 KB and 153 KB when the runtime kept
    the body; 4.5 KB and 56.8 KB with the template kept as a dict."""
    payloads = [wire(job_body(i, typical=typical)) for i in range(200)]
    size = sum(map(len, payloads)) / len(payloads)
    assert (30_000 < size < 40_000) if typical else (2_500 < size < 3_500)
    assert record_bytes(payloads)[0] < most


def test_a_new_generation_s_template_is_the_one_pods_are_built_from() -> None:
    body = json.loads(wire(job_body(3)))
    rt = JobRuntime(copy.deepcopy(body))
    status_only = copy.deepcopy(body)  # a status write: same generation, same spec
    status_only["metadata"]["resourceVersion"] = "2000000"
    status_only["status"]["ready"] = 4
    assert rt.offer(status_only) and keeps(rt, status_only)
    changed = copy.deepcopy(status_only)  # a spec change: a new generation
    changed["metadata"]["resourceVersion"] = "2000001"
    changed["metadata"]["generation"] += 1
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.38"
    assert rt.offer(changed) and keeps(rt, changed)
    [pod] = _pods(rt.body, PodPlan(create=1))
    assert pod["spec"]["containers"][0]["image"] == "busybox:1.38"
    rt.body["spec"]["template"]["spec"]["containers"].clear()  # a copy: the record stays
    assert keeps(rt, changed)


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
