"""A queued ParallelJob, its Workload and the flavors, as the API server would return
them, for the tests of core/kueue (the Workload is the one the operator creates for the
job, then given a status)."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from paralleljob.core.kueue.podsets import (
    QUEUE_LABEL,
    Priority,
    QueuedJob,
    new_workload,
    parse_queued_job,
)
from paralleljob.core.kueue.workload_model import ResourceFlavor, Workload, parse_workload

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
UID = "6f1c1b2e-0000-4000-8000-000000000001"
#: The job's template as the user wrote it (the ParallelJob's CRD defaults nothing in it).
TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "demo"}},
    "spec": {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "work",
                "image": "busybox",
                "ports": [{"containerPort": 8080}],
                "resources": {"requests": {"cpu": "500m"}},
            }
        ],
    },
}
SPOT_TOLERATION = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
FLAVORS = {
    "on-demand": ResourceFlavor("on-demand", {"pool": "on-demand"}),
    "spot": ResourceFlavor("spot", {"pool": "spot", "zone": "a"}, (SPOT_TOLERATION,)),
    "gpu": ResourceFlavor("gpu", {"accelerator": "a100"}),
}


def stamp(seconds_before_t0: float) -> str:
    return (T0 - timedelta(seconds=seconds_before_t0)).strftime("%Y-%m-%dT%H:%M:%SZ")


def job(
    *,
    parallelism: int | None = 3,
    completions: int | None = 6,
    suspend: bool = True,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    template: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    deleting: bool = False,
    queue: str | None = "lq",
) -> QueuedJob:
    meta: dict[str, Any] = {
        "name": "demo",
        "namespace": "ns",
        "uid": UID,
        "labels": {**({QUEUE_LABEL: queue} if queue else {}), **(labels or {})},
        "annotations": dict(annotations or {}),
    }
    if deleting:
        meta["deletionTimestamp"] = stamp(1)
    spec: dict[str, Any] = {"suspend": suspend, "template": copy.deepcopy(template or TEMPLATE)}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return parse_queued_job({"metadata": meta, "spec": spec, "status": dict(status or {})})


def cond(
    ctype: str, status: str = "True", reason: str = "", message: str = "", ago: float = 60
) -> dict[str, Any]:
    return {
        "type": ctype,
        "status": status,
        "reason": reason or ctype,
        "message": message,
        "lastTransitionTime": stamp(ago),
        "observedGeneration": 1,
    }


#: A Workload admitted at once (no admission checks).
ADMITTED = (cond("QuotaReserved", ago=120), cond("Admitted", ago=120))


def admission(
    flavors: Mapping[str, str] | None = None, count: int | None = None, cq: str = "cq"
) -> dict[str, Any]:
    assignment: dict[str, Any] = {"name": "main", "flavors": dict(flavors or {"cpu": "on-demand"})}
    if count is not None:
        assignment["count"] = count
    return {"clusterQueue": cq, "podSetAssignments": [assignment]}


def workload(
    of: QueuedJob | None = None,
    *,
    conditions: Iterable[Mapping[str, Any]] = (),
    admitted_with: Mapping[str, Any] | None = None,
    reclaimable: Iterable[Mapping[str, Any]] = (),
    checks: Iterable[Mapping[str, Any]] = (),
    finalizer: bool = True,
    deleting: bool = False,
    priority: Priority | None = None,
    **metadata: Any,
) -> Workload:
    """The Workload the operator creates for ``of`` (the default job), with a status."""
    body = new_workload(of or job(), priority or Priority())
    body["metadata"].update(uid="wl-uid", generation=2, resourceVersion="7", **metadata)
    if not finalizer:
        body["metadata"]["finalizers"] = []
    if deleting:
        body["metadata"]["deletionTimestamp"] = stamp(1)
    status: dict[str, Any] = {"conditions": [dict(c) for c in conditions]}
    if admitted_with is not None:
        status["admission"] = dict(admitted_with)
    if reclaimable:
        status["reclaimablePods"] = [dict(r) for r in reclaimable]
    if checks:
        status["admissionChecks"] = [dict(c) for c in checks]
    body["status"] = status
    return parse_workload(body)
