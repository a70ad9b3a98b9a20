"""Scale-down honours controller.kubernetes.io/pod-deletion-cost (issue 38, item 2): a
work queue's idle workers (low cost) go before its busy ones (high cost), where
upstream's Job order alone would pick the busy ones."""

from __future__ import annotations

from dataclasses import replace

import pytest

from paralleljob import constants as c
from paralleljob.core.job.model import JobSpec

from ..sim import Sim

IDLE, BUSY = -100, 100  # what paralleljob-worker --deletion-cost sets (worker/podcost.py)


def _work_queue(costs: dict[int, int] | None) -> tuple[Sim, list[str], list[str]]:
    """Four running workers of a work queue; the two that became ready last (which
    upstream's order removes first) are busy, the other two idle. ``costs``: the cost
    each kind of worker carries (None: no annotation). Returns (sim, idle, busy)."""
    sim = Sim(JobSpec(completions=None, parallelism=4, backoff_limit=0))
    sim.sync()
    sim.run(2)
    sim.advance(30)
    for pod in sim.active():  # the last two ready 30 s later: upstream removes them first
        if pod.phase == c.PENDING:
            sim.pods[pod.uid] = replace(
                pod, phase=c.RUNNING, node_assigned=True, ready=True, ready_since=sim.now
            )
    pods = sorted(sim.active(), key=lambda p: p.ready_since or 0)
    idle, busy = [p.uid for p in pods[:2]], [p.uid for p in pods[2:]]
    if costs is not None:
        for uid in idle:
            sim.pods[uid] = replace(sim.pods[uid], deletion_cost=costs[IDLE])
        for uid in busy:
            sim.pods[uid] = replace(sim.pods[uid], deletion_cost=costs[BUSY])
    return sim, idle, busy


def test_scale_down_removes_the_idle_workers_first() -> None:
    sim, idle, busy = _work_queue({IDLE: IDLE, BUSY: BUSY})
    sim.patch_spec(parallelism=2)
    sim.sync()
    plan = sim.last_plan
    assert plan is not None and plan.reason == "scale-down"
    assert sorted(p.uid for p in plan.delete) == sorted(idle)
    assert plan.remove_finalizer_before_delete, "a surplus pod is not counted failed"
    assert sorted(p.uid for p in sim.active()) == sorted(busy)
    sim.reap()
    sim.settle()
    assert sim.status.failed == 0 and sim.status.active == 2
    # The busy workers finish their items and the queue completes.
    sim.succeed(2)
    sim.settle()
    assert sim.condition(c.COND_COMPLETE) == "True"


@pytest.mark.parametrize(
    "costs", [None, {IDLE: 0, BUSY: 0}, {IDLE: 5, BUSY: 5}], ids=["none", "zero", "equal"]
)
def test_without_costs_upstreams_order_holds(costs: dict[int, int] | None) -> None:
    """No annotation (or the same cost on all) behaves exactly as before: the pods
    ready for less time go first, here the busy ones."""
    sim, _, busy = _work_queue(costs)
    sim.patch_spec(parallelism=2)
    sim.sync()
    assert sim.last_plan is not None
    assert sorted(p.uid for p in sim.last_plan.delete) == sorted(busy)


def test_the_cost_never_outranks_a_pending_pod() -> None:
    """A pending pod (an idle worker's cost notwithstanding) still goes first: the
    cost comes after unassigned < assigned, the phase and readiness."""
    sim, idle, _ = _work_queue({IDLE: IDLE, BUSY: BUSY})
    sim.patch_spec(parallelism=5)
    sim.sync()
    [pending] = [p.uid for p in sim.active() if p.phase == c.PENDING]
    sim.patch_spec(parallelism=3)
    sim.sync()
    assert sim.last_plan is not None
    deleted = [p.uid for p in sim.last_plan.delete]
    assert deleted[0] == pending and deleted[1] in idle
