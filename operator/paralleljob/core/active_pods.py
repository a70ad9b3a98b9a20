"""A job's active pods and the order in which they go: ``controller.ActivePods``.

Ports what ``pkg/controller/job`` uses of ``pkg/controller/controller_utils.go``
(Kubernetes v1.37.2): ``FilterActivePods`` (:func:`active_pods`) and the order of
``ActivePods`` (:func:`removal_order_key`), which sorts the pods to delete first first.
It sits below its two users: scale-down in the core (``sync.pods_for_removal``,
upstream's ``activePodsForRemoval``) and an Indexed job's duplicate indexes
(``indexed.append_duplicated_index_pods_for_removal``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from .. import constants as c
from .model import PodInfo


def active_pods(pods: Iterable[PodInfo]) -> list[PodInfo]:
    """FilterActivePods: the pods neither finished nor being deleted."""
    return [p for p in pods if p.active]


def _ts(value: datetime | None) -> float:
    return value.timestamp() if value is not None else 0.0


def removal_order_key(pod: PodInfo) -> tuple[int, int, int, float, int, float]:
    """controller.ActivePods: unscheduled < scheduled, Pending < Unknown < Running,
    not ready < ready, ready for less time < more, more restarts < fewer, newer < older."""
    phase_rank = {c.PENDING: 0, c.UNKNOWN: 1, c.RUNNING: 2}.get(pod.phase, 0)
    # A zero ready time sorts first; otherwise later (more recent) first.
    ready_since = -_ts(pod.ready_since) if pod.ready and pod.ready_since else float("-inf")
    created = -_ts(pod.created) if pod.created else float("-inf")
    return (
        1 if pod.node_assigned else 0,
        phase_rank,
        1 if pod.ready else 0,
        ready_since,
        -pod.max_restarts,
        created,
    )
