"""A job's active pods and the order in which they go: ``controller.ActivePods``.

Ports what ``pkg/controller/job`` uses of ``pkg/controller/controller_utils.go``
(Kubernetes v1.37.2): ``FilterActivePods`` (:func:`active_pods`) and the order of
``ActivePods`` (:func:`removal_order_key`), which sorts the pods to delete first first.
It sits below its two users: scale-down in the core (``sync.pods_for_removal``,
upstream's ``activePodsForRemoval``) and an Indexed job's duplicate indexes
(``indexed.append_duplicated_index_pods_for_removal``).

A ParallelJob's order also honours ``controller.kubernetes.io/pod-deletion-cost``
(:func:`removal_order_key_by_cost`), as a ReplicaSet's does (``ActivePodsWithRanks.Less``
rule 4: after unassigned < assigned, phase and readiness, before the rest); a batch/v1
Job keeps upstream's Job order (:func:`removal_key`, by ``JobKind.honours_deletion_cost``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from ... import constants as c
from .model import PodInfo


def active_pods(pods: Iterable[PodInfo]) -> list[PodInfo]:
    """FilterActivePods: the pods neither finished nor being deleted."""
    return [p for p in pods if p.active]


def _ts(value: datetime | None) -> float:
    return value.timestamp() if value is not None else 0.0


RemovalKey = Callable[[PodInfo], tuple[int | float, ...]]


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


def removal_order_key_by_cost(pod: PodInfo) -> tuple[int, int, int, int, float, int, float]:
    """:func:`removal_order_key` with the pod's deletion cost (lower first) after its
    readiness, where ``ActivePodsWithRanks.Less`` compares it: a cost never overrides
    unassigned < assigned, Pending < Unknown < Running or not ready < ready. (Upstream's
    rank, rule 5, counts a ReplicaSet's ready pods on the same node: a Job has none.)"""
    assigned, phase_rank, ready, ready_since, restarts, created = removal_order_key(pod)
    return (assigned, phase_rank, ready, pod.deletion_cost, ready_since, restarts, created)


def removal_key(by_deletion_cost: bool) -> RemovalKey:
    """The order of a kind's pods: with their deletion cost (a ParallelJob's), or
    upstream's Job order exactly (a batch/v1 Job's)."""
    return removal_order_key_by_cost if by_deletion_cost else removal_order_key
