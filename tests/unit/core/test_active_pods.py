"""A job's active pods and their deletion order (``core/active_pods.py``), as upstream
tests ``controller.ActivePods`` (pkg/controller/controller_utils_test.go at Kubernetes
v1.34.4: TestSortingActivePods)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import pytest

from paralleljob import constants as c
from paralleljob.core.active_pods import active_pods, removal_order_key
from paralleljob.core.model import PodInfo

from ..sim import T0

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
