"""A job's active pods and their deletion order (``core/job/active_pods.py``), as upstream
tests ``controller.ActivePods`` (pkg/controller/controller_utils_test.go at Kubernetes
v1.34.4: TestSortingActivePods), and a ParallelJob's order by pod-deletion-cost as
upstream tests ``ActivePodsWithRanks`` (TestSortingActivePodsWithRanks)."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from paralleljob import constants as c
from paralleljob.core.job.active_pods import (
    active_pods,
    removal_key,
    removal_order_key,
    removal_order_key_by_cost,
)
from paralleljob.core.job.kind import PARALLELJOB, batch_job
from paralleljob.core.job.model import PodInfo
from paralleljob.core.job.sync import pods_for_removal
from tests.unit.sim import T0

NOW = T0
THEN = T0 - timedelta(days=30)


def running(
    name: str,
    *,
    ready: bool = True,
    since: datetime | None = THEN,
    restarts: int = 0,
    created: datetime | None = None,
) -> PodInfo:
    """A scheduled Running pod, ready since ``since`` unless not ``ready``."""
    return PodInfo(
        name,
        name,
        c.RUNNING,
        node_assigned=True,
        ready=ready,
        ready_since=since if ready else None,
        max_restarts=restarts,
        created=created,
    )


#: TestSortingActivePods' "Sorts by active pod", in the order upstream wants. Upstream's
#: lowerSidecarContainerRestartCount is left out: PodInfo keeps no sidecar restarts.
SORTED = [
    PodInfo("unscheduled", "1", c.PENDING),
    PodInfo("scheduledButPending", "2", c.PENDING, node_assigned=True),
    PodInfo("unknownPhase", "3", c.UNKNOWN, node_assigned=True),
    running("runningButNotReady", ready=False),
    running("runningNoLastTransitionTime", since=None, restarts=3),
    running("runningWithLastTransitionTime", since=NOW, restarts=3),
    running("runningLongerTime", restarts=3),
    running("lowerContainerRestartCount", restarts=2, created=NOW),
    running("oldest", restarts=2, created=THEN),
]


@pytest.mark.parametrize("seed", range(20))
def test_sorting_active_pods(seed: int) -> None:
    """Ports TestSortingActivePods: any order of the pods sorts into the wanted one."""
    pods = list(SORTED)
    random.Random(seed).shuffle(pods)
    assert [p.name for p in sorted(pods, key=removal_order_key)] == [p.name for p in SORTED]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(
            PodInfo("a", "a", c.RUNNING),
            PodInfo("b", "b", c.PENDING, node_assigned=True),
            id="unassigned before assigned, whatever the phase",
        ),
        pytest.param(
            PodInfo("a", "a", c.RUNNING, node_assigned=True, created=NOW),
            PodInfo("b", "b", c.RUNNING, node_assigned=True, created=THEN),
            id="newer before older",
        ),
        pytest.param(
            PodInfo("a", "a", c.RUNNING, node_assigned=True),
            PodInfo("b", "b", c.RUNNING, node_assigned=True, created=NOW),
            id="no creation time first",
        ),
        pytest.param(
            PodInfo("a", "a", c.RUNNING, node_assigned=True, max_restarts=1, created=THEN),
            PodInfo("b", "b", c.RUNNING, node_assigned=True, created=NOW),
            id="more restarts before a newer pod",
        ),
    ],
)
def test_removal_order(first: PodInfo, second: PodInfo) -> None:
    """ActivePods.Less, one rule at a time."""
    assert removal_order_key(first) < removal_order_key(second)


def test_active_pods_are_neither_finished_nor_deleted() -> None:
    """FilterActivePods: Pending, Running and Unknown pods not being deleted, in order."""
    pods = [
        PodInfo("pending", "1", c.PENDING),
        PodInfo("succeeded", "2", c.SUCCEEDED),
        PodInfo("running", "3", c.RUNNING),
        PodInfo("failed", "4", c.FAILED),
        PodInfo("deleted", "5", c.RUNNING, deleting=True),
        PodInfo("unknown", "6", c.UNKNOWN),
    ]
    assert [p.name for p in active_pods(pods)] == ["pending", "running", "unknown"]


# ------------------------------------------------------------- pod-deletion-cost
def costing(name: str, cost: int, *, restarts: int = 0, created: datetime = THEN) -> PodInfo:
    """A scheduled Running pod ready now, created a month ago, with deletion cost
    ``cost``: upstream's lowPodDeletionCost (10) and highPodDeletionCost (100)."""
    pod = running(name, since=NOW, restarts=restarts, created=created)
    return replace(pod, deletion_cost=cost)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # TestSortingActivePodsWithRanks: lowPodDeletionCost < highPodDeletionCost.
        pytest.param(costing("low", 10), costing("high", 100), id="lower cost first"),
        pytest.param(costing("neg", -100), costing("none", 0), id="a negative cost first"),
        pytest.param(costing("min", -(2**31)), costing("max", 2**31 - 1), id="int32 bounds"),
        # The cost comes after rules 1-3, so it never overrides them.
        pytest.param(
            replace(PodInfo("u", "u", c.RUNNING), deletion_cost=1000),
            costing("assigned", -1000),
            id="unassigned first whatever the costs",
        ),
        pytest.param(
            replace(PodInfo("p", "p", c.PENDING, node_assigned=True), deletion_cost=1000),
            costing("running", -1000),
            id="pending first whatever the costs",
        ),
        pytest.param(
            replace(running("nr", ready=False), deletion_cost=1000),
            costing("ready", -1000),
            id="not ready first whatever the costs",
        ),
        # ... and before rules 6-8.
        pytest.param(
            replace(running("longer", since=THEN, created=THEN), deletion_cost=-1),
            replace(running("shorter", since=NOW, created=THEN), deletion_cost=0),
            id="cost before ready time",
        ),
        pytest.param(
            costing("fewer-restarts", 0, restarts=0),
            costing("more-restarts", 1, restarts=5),
            id="cost before restarts",
        ),
        pytest.param(
            replace(running("older", created=THEN), deletion_cost=-5),
            replace(running("newer", created=NOW), deletion_cost=5),
            id="cost before creation time",
        ),
    ],
)
def test_removal_order_by_cost(first: PodInfo, second: PodInfo) -> None:
    """ActivePodsWithRanks.Less rule 4 (the rank, rule 5, counts a ReplicaSet's ready
    pods on a node: a Job has none)."""
    assert removal_order_key_by_cost(first) < removal_order_key_by_cost(second)
    assert removal_order_key_by_cost(second) > removal_order_key_by_cost(first)


def test_equal_costs_keep_upstreams_order() -> None:
    """TestSortingActivePodsWithRanks' equality: with the same cost everywhere (0 or
    not), the order is upstream's Job order."""
    for cost in (0, 7):
        pods = [replace(p, deletion_cost=cost) for p in SORTED]
        random.Random(cost).shuffle(pods)
        assert [p.name for p in sorted(pods, key=removal_order_key_by_cost)] == [
            p.name for p in SORTED
        ]


def test_a_jobs_order_ignores_the_cost() -> None:
    """TestSortingActivePodsWithRanks with PodDeletionCost off: a batch/v1 Job's pods
    keep upstream's Job order, which has no cost (JobKind.honours_deletion_cost)."""
    high, low = costing("high", 100, created=NOW), costing("low", 10)
    assert not batch_job(take_unmanaged=False).honours_deletion_cost
    assert PARALLELJOB.honours_deletion_cost
    assert removal_key(False) is removal_order_key
    assert sorted([low, high], key=removal_key(False)) == [high, low]  # newer first
    assert sorted([high, low], key=removal_key(True)) == [low, high]


def test_pods_for_removal_by_cost_and_of_a_duplicated_index() -> None:
    """sync.pods_for_removal: a ParallelJob's scale-down and an Indexed job's duplicate
    index both keep the costlier pod; without by_deletion_cost (a Job), upstream's order."""
    busy = replace(running("busy", since=NOW, created=NOW), deletion_cost=100, completion_index=0)
    idle = replace(
        running("idle", since=THEN, created=THEN), deletion_cost=-100, completion_index=0
    )
    assert pods_for_removal([busy, idle], 1, by_deletion_cost=True) == (idle,)
    assert pods_for_removal([busy, idle], 1) == (busy,)  # ready for less time, newer
    assert pods_for_removal([busy, idle], 0, 1, by_deletion_cost=True) == (idle,)
    assert pods_for_removal([busy, idle], 0, 1) == (busy,)
