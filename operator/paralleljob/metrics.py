"""Prometheus metrics: the upstream job controller's, under a ``paralleljob_controller_``
prefix, plus the operator's API traffic and pending work.

The job-controller metrics keep upstream's names, labels, buckets and meaning
(``pkg/controller/job/metrics/metrics.go``), so dashboards built for
``job_controller_*`` work with the prefix changed. Served by :func:`serve` on the
operator's metrics port (``--metrics-port``, default 8081) at ``/metrics``, with the
client library's process metrics (``process_resident_memory_bytes``,
``process_cpu_seconds_total``, ...).
"""

from __future__ import annotations

import re
from collections.abc import Sized
from typing import Protocol

from aiohttp import web
from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.aiohttp import make_aiohttp_handler

PREFIX = "paralleljob_controller"

#: The only completion mode the operator has so far (the metrics' label value).
NON_INDEXED = "NonIndexed"

# getCompletionMode / JobSyncAction* / Succeeded, Failed / Add, Delete upstream.
ACTION_RECONCILING = "reconciling"
ACTION_TRACKING = "tracking"
ACTION_PODS_CREATED = "pods_created"
ACTION_PODS_DELETED = "pods_deleted"
SUCCEEDED = "succeeded"
FAILED = "failed"

JOB_SYNC_DURATION = Histogram(
    f"{PREFIX}_job_sync_duration_seconds",
    "The time it took to sync a job",
    ["completion_mode", "result", "action"],
    buckets=[0.004 * 2**i for i in range(15)],
)
JOB_SYNCS = Counter(
    f"{PREFIX}_job_syncs", "The number of job syncs", ["completion_mode", "result", "action"]
)
JOBS_FINISHED = Counter(
    f"{PREFIX}_jobs_finished",
    "The number of finished jobs",
    ["completion_mode", "result", "reason"],
)
JOB_PODS_FINISHED = Counter(
    f"{PREFIX}_job_pods_finished",
    "The number of finished Pods that are fully tracked",
    ["completion_mode", "result"],
)
TRACKING_FINALIZER = Counter(
    f"{PREFIX}_terminated_pods_tracking_finalizer",
    "The number of terminated pods (phase=Failed|Succeeded) that have the finalizer "
    'paralleljob.dev/tracking. The event label can be "add" or "delete".',
    ["event"],
)
JOB_PODS_CREATION = Counter(
    f"{PREFIX}_job_pods_creation",
    'The number of Pods created by the operator, by reason ("new") and status '
    '("succeeded", "failed")',
    ["reason", "status"],
)
API_REQUESTS = Counter(
    f"{PREFIX}_api_requests",
    "API requests made by the operator's client, by verb, resource and HTTP status code "
    '(code "0": no answer)',
    ["verb", "resource", "code"],
)
API_RATE_LIMITER_WAIT = Histogram(
    f"{PREFIX}_api_rate_limiter_duration_seconds",
    "Time requests waited for the client-side rate limiter (PJ_API_QPS)",
    buckets=[0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
)
JOBS = Gauge(f"{PREFIX}_jobs", "ParallelJobs the operator runs a sync loop for")
JOBS_PENDING_SYNC = Gauge(
    f"{PREFIX}_jobs_pending_sync",
    "Jobs with work waiting for a sync (woken by an event or a timer, sync not started)",
)
DURATION_REFRESH_WAITING = Gauge(
    f"{PREFIX}_duration_refresh_waiting",
    "Jobs waiting for a slot of the DURATION refresh budget (PJ_DURATION_REFRESH_QPS)",
)
PROGRESS_WRITE_WAITING = Gauge(
    f"{PREFIX}_progress_write_waiting",
    "Jobs waiting for a slot of the progress status write budget (PJ_PROGRESS_WRITE_QPS)",
)

_ID = r"[^/]+"
_RESOURCE_PATH = re.compile(
    rf"^/(?:api/{_ID}|apis/{_ID}/{_ID})(?:/namespaces/{_ID})?/(?P<resource>{_ID})"
    rf"(?:/{_ID}(?:/(?P<sub>{_ID}))?)?/?$"
)


def resource_of(path: str) -> str:
    """The API resource a request path names: ``pods``, ``paralleljobs/status``, ...;
    ``namespaces`` for a namespace itself; ``other`` for non-resource paths."""
    match = _RESOURCE_PATH.match(path.split("?", 1)[0])
    if match is None:
        return "other"
    sub = match.group("sub")
    return f"{match.group('resource')}/{sub}" if sub else match.group("resource")


def sync_action(created: int, deleted: int, managed: bool) -> str:
    """The ``action`` label of a sync, as manageJob's return value sets it upstream."""
    if created > 0:
        return ACTION_PODS_CREATED
    if deleted > 0:
        return ACTION_PODS_DELETED
    return ACTION_TRACKING if managed else ACTION_RECONCILING


class FinishedWithFinalizer:
    """recordFinishedPodWithTrackingFinalizer: counts pods entering ("add") and leaving
    ("delete") the state "terminated and still holding the tracking finalizer",
    remembering only the pods in that state."""

    def __init__(self) -> None:
        self._in_state: set[str] = set()

    def observe(self, uid: str, is_in_state: bool) -> None:
        was = uid in self._in_state
        if was == is_in_state:
            return
        if is_in_state:
            self._in_state.add(uid)
            TRACKING_FINALIZER.labels("add").inc()
        else:
            self._in_state.discard(uid)
            TRACKING_FINALIZER.labels("delete").inc()


class ControllerState(Protocol):
    """What the scrape-time gauges read (the Controller)."""

    @property
    def jobs(self) -> Sized: ...

    def pending_syncs(self) -> int: ...

    def duration_refresh_waiting(self) -> int: ...

    def progress_write_waiting(self) -> int: ...


def track_state(controller: ControllerState) -> None:
    """The gauges are computed when scraped, from the controller's state."""
    JOBS.set_function(lambda: float(len(controller.jobs)))
    JOBS_PENDING_SYNC.set_function(lambda: float(controller.pending_syncs()))
    DURATION_REFRESH_WAITING.set_function(lambda: float(controller.duration_refresh_waiting()))
    PROGRESS_WRITE_WAITING.set_function(lambda: float(controller.progress_write_waiting()))


async def serve(port: int) -> web.AppRunner:
    """Serves ``/metrics`` on ``0.0.0.0:port`` inside the operator's event loop."""
    app = web.Application()
    app.router.add_get("/metrics", make_aiohttp_handler())
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", port).start()
    return runner
