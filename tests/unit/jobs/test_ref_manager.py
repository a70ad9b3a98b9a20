"""Which pods a job claims (ref_manager.py, upstream's ClaimObject cases) and the
controller adopting and releasing them before the core counts anything."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from paralleljob import constants as c
from paralleljob.core import candidate_jobs
from paralleljob.core.job.model import JobSpec, PodInfo
from paralleljob.jobs.ref_manager import Claims, claim_pods
from paralleljob.runtime.api import ApiError
from tests.unit.sim import Sim

JOB, OTHER = "job-uid", "other-uid"
OWNED = PodInfo("owned", "u1", namespace="ns", label_uid=JOB, controller_uid=JOB)
UNLABELLED = replace(OWNED, name="unlabelled", uid="u2", label_uid="")
RELABELLED = replace(OWNED, name="relabelled", uid="u3", label_uid=OTHER)
ORPHAN = replace(OWNED, name="orphan", uid="u4", controller_uid=None)
ORPHAN_DELETING = replace(ORPHAN, name="orphan-deleting", uid="u5", deleting=True)
ORPHAN_ELSEWHERE = replace(ORPHAN, name="orphan-elsewhere", uid="u6", namespace="other")
FOREIGN = replace(OWNED, name="foreign", uid="u7", controller_uid=OTHER)
ALL = (OWNED, UNLABELLED, RELABELLED, ORPHAN, ORPHAN_DELETING, ORPHAN_ELSEWHERE, FOREIGN)


@pytest.mark.parametrize(
    ("job_deleting", "claims"),
    [
        (False, Claims(owned=(OWNED,), adopt=(ORPHAN,), release=(UNLABELLED, RELABELLED))),
        # Being deleted: keeps what it owns, adopts and releases nothing.
        (True, Claims(owned=(OWNED,))),
    ],
    ids=["running", "deleting"],
)
def test_claims(job_deleting: bool, claims: Claims) -> None:
    assert claim_pods(JOB, "ns", job_deleting, ALL) == claims


def test_a_pod_is_looked_at_by_the_job_it_names_and_the_job_that_controls_it() -> None:
    assert candidate_jobs(RELABELLED) == {JOB, OTHER}
    assert candidate_jobs(UNLABELLED) == {JOB}
    assert candidate_jobs(ORPHAN) == {JOB}


# -- the controller --------------------------------------------------------------------
def _running() -> Sim:
    sim = Sim(JobSpec(parallelism=2, completions=4))
    sim.sync()
    sim.run()
    sim.settle()
    return sim


def test_a_pod_that_loses_its_label_is_released_not_counted_and_replaced() -> None:
    sim = _running()
    pod = sim.active()[0]
    sim.pods[pod.uid] = replace(pod, label_uid=OTHER)
    sim.settle()
    released = sim.pods[pod.uid]
    assert (released.controller_uid, released.has_finalizer) == (None, False)
    assert (sim.status.failed, sim.status.active) == (0, 2), "replaced, never failed"
    assert len(sim.created) == 3


def test_a_matching_orphan_is_adopted_and_counted() -> None:
    sim = _running()
    pod = sim.active()[0]
    sim.pods[pod.uid] = replace(pod, controller_uid=None, has_finalizer=False, phase=c.SUCCEEDED)
    sim.settle()
    adopted = sim.pods[pod.uid]
    assert adopted.controller_uid == sim.job.uid
    assert sim.status.succeeded == 1 and not adopted.has_finalizer, "counted, then released"


def test_a_pod_another_owner_controls_is_never_touched_nor_counted() -> None:
    sim = _running()
    pod = sim.active()[0]
    sim.pods[pod.uid] = replace(pod, controller_uid=OTHER, phase=c.SUCCEEDED)
    mark = len(sim.api.calls)
    sim.settle()
    assert all(call.name != pod.name for call in sim.api.calls[mark:])
    assert (sim.status.succeeded, sim.status.active) == (0, 2)


def test_a_refused_adoption_fails_the_sync_before_anything_is_counted() -> None:
    sim = _running()
    pod = sim.active()[0]
    sim.pods[pod.uid] = replace(pod, controller_uid=None)
    sim.api.fail("adopt_pod", ApiError(500, "InternalError", "etcd is away"))
    mark = len(sim.api.calls)
    with pytest.raises(ApiError):
        asyncio.run(sim.controller.syncer.sync(sim.runtime))
    assert [call.method for call in sim.api.calls[mark:]] == ["adopt_pod"]


def test_a_pod_event_handled_during_the_claim_never_settles_a_stale_snapshot() -> None:
    """The claim's snapshot and the expectations are read with no await between them: a
    pod event handled in between would settle the creation of a pod the snapshot does not
    show, and the sync would create it again."""
    sim = _running()
    hidden = sim.active()[1]
    runtime = sim.runtime
    # Just created by the operator, not yet shown by the cache; its event is on its way.
    runtime.pods.expectations.expect_creation(hidden.uid, sim.now.timestamp())

    def lagging_cache(uid: str) -> list[PodInfo]:
        def event() -> None:
            runtime.pods.expectations.observe_pod(
                hidden.uid, gone=False, deleting=False, has_finalizer=True
            )

        asyncio.get_running_loop().call_soon(event)
        return [p for p in sim.api.pods_of(uid) if p.uid != hidden.uid]

    runtime.offer(sim.api.job)
    report = asyncio.run(sim.controller.syncer.sync(runtime))
    assert report.plan.create == 0, "not while a creation is unobserved"
