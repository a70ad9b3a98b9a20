"""Prometheus metrics: the upstream job controller's, under a ``paralleljob_controller_``
prefix, plus the operator's API traffic and pending work.

The job-controller metrics keep upstream's names, labels, buckets and meaning
(``pkg/controller/job/metrics/metrics.go``), so dashboards built for
``job_controller_*`` work with the prefix changed. Served by :func:`serve` on the
operator's metrics port (``--metrics-port``, default 8081, on ``--bind-address``) at
``/metrics``, with the client library's process metrics
(``process_resident_memory_bytes``, ``process_cpu_seconds_total``, ...).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable, Sequence, Sized
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web
from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.aiohttp import make_aiohttp_handler

from .. import constants as c
from ..core import (
    POD_REPLACEMENT_FAILED,
    JobSpec,
    JobStatus,
    intervals_total,
    parse_indexes_from_string,
)
from ..version import version

PREFIX = "paralleljob_controller"

# getCompletionMode / JobSyncAction* / Succeeded, Failed / Add, Delete upstream.
ACTION_RECONCILING = "reconciling"
ACTION_TRACKING = "tracking"
ACTION_PODS_CREATED = "pods_created"
ACTION_PODS_DELETED = "pods_deleted"
SUCCEEDED = "succeeded"
FAILED = "failed"
# PodCreateNew, PodRecreateTerminatingOrFailed, PodRecreateFailed upstream.
CREATE_NEW = "new"
RECREATE_TERMINATING_OR_FAILED = "recreate_terminating_or_failed"
RECREATE_FAILED = "recreate_failed"
# backoffLimitMetricsLabel's values.
BACKOFF_LIMIT_PER_INDEX = "perIndex"
BACKOFF_LIMIT_GLOBAL = "global"

JOB_SYNC_DURATION = Histogram(
    f"{PREFIX}_job_sync_duration_seconds",
    "The time it took to sync a job",
    ["completion_mode", "result", "action"],
    buckets=[0.004 * 2**i for i in range(15)],
)
#: The running version (VERSION), as kube's ``kubernetes_build_info``: always 1.
BUILD_INFO = Gauge("paralleljob_build_info", "The operator's version: 1", ["version"])
BUILD_INFO.labels(version=version()).set(1)
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
    "The number of Pods created by the operator, by reason for the creation "
    '("new", "recreate_terminating_or_failed", "recreate_failed": the job had failed or '
    'terminating pods, by its podReplacementPolicy) and status ("succeeded", "failed")',
    ["reason", "status"],
)
POD_FAILURES_HANDLED_BY_FAILURE_POLICY = Counter(
    f"{PREFIX}_pod_failures_handled_by_failure_policy",
    "The number of failed Pods handled by the pod failure policy, by the action of the "
    'rule they matched ("FailJob", "FailIndex", "Ignore", "Count")',
    ["action"],
)
JOB_FINISHED_INDEXES = Counter(
    f"{PREFIX}_job_finished_indexes",
    'The number of finished indexes of Indexed jobs, by status ("succeeded", "failed") '
    'and backoffLimit ("perIndex", "global")',
    ["status", "backoffLimit"],
)
JOBS_BY_EXTERNAL_CONTROLLER = Counter(
    f"{PREFIX}_jobs_by_external_controller",
    "The number of jobs managed by an external controller (spec.managedBy), by "
    "controller_name: the value of spec.managedBy",
    ["controller_name"],
)
API_REQUESTS = Counter(
    f"{PREFIX}_api_requests",
    "API requests made by the operator's client, by verb, resource and HTTP status code "
    '(code "0": no answer)',
    ["verb", "resource", "code"],
)
WRITES_FENCED = Counter(
    f"{PREFIX}_writes_fenced",
    "Writes not sent because this replica's Lease was not valid by its own clock (a pause "
    "past the Lease, or the Lease lost), by verb and resource",
    ["verb", "resource"],
)
STALE_SYNC_SKIPS = Counter(
    f"{PREFIX}_stale_sync_skips",
    "Job syncs skipped because a cache had not yet shown one of the operator's own writes "
    "(read-your-writes), by the group and resource of that cache",
    ["group", "resource"],
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
#: The buckets of the event loop's pauses (seconds).
PAUSE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
#: How often the event loop's lag is sampled.
LOOP_LAG_SAMPLE_SECONDS = 0.5
EVENT_LOOP_LAG = Histogram(
    f"{PREFIX}_event_loop_lag_seconds",
    "How late the operator's event loop ran a timer that was due (sampled every "
    f"{LOOP_LAG_SAMPLE_SECONDS} s): the wait every event, sync and API response shares "
    "while the loop is busy",
    buckets=PAUSE_BUCKETS,
)
EVENT_LOOP_BLOCKED = Histogram(
    f"{PREFIX}_event_loop_blocked_seconds",
    "The part of each event-loop lag sample the operator's own computing caused (GC, "
    "parsing, syncs): the lag less the time the loop's thread waited meanwhile for a CPU "
    "it was ready to run on (a busy machine, a low CPU weight), and at most the CPU time "
    "it used meanwhile (the rest it was blocked off the CPU); from "
    "/proc/thread-self/schedstat, the whole lag where the kernel does not report it",
    buckets=PAUSE_BUCKETS,
)
FULL_COLLECTIONS = Histogram(
    f"{PREFIX}_gc_full_collection_seconds",
    "How long each full collection of Python's cyclic garbage collector held the event loop",
    buckets=PAUSE_BUCKETS,
)
FULL_COLLECTIONS_BLOCKED = Histogram(
    f"{PREFIX}_gc_full_collection_blocked_seconds",
    "The part of each full collection the operator's own computing took: its time less "
    "the time the loop's thread waited meanwhile for a CPU, as event_loop_blocked_seconds",
    buckets=PAUSE_BUCKETS,
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


def record_stale_sync(group: str, resource: str) -> None:
    """upstream's JobRequeueSkips (job_controller_stale_sync_skips_total)."""
    STALE_SYNC_SKIPS.labels(group, resource).inc()


def pod_creation_reason(pod_replacement_policy: str, failed: int, terminating: int) -> str:
    """recordJobPodsCreationTotal's ``reason`` label (the JobPodReplacementPolicy gate is
    gone since v1.37: always on): ``recreate_failed`` when only failed pods are replaced
    and the job has failed pods, ``recreate_terminating_or_failed`` when it has failed or
    terminating pods, else ``new``. ``failed`` is syncJob's jobCtx.failed (counted,
    uncounted and new failures, those a pod failure policy ignores left out) and
    ``terminating`` jobCtx.terminating; ``pod_replacement_policy`` is as defaulted
    (Failed when a pod failure policy is set)."""
    if pod_replacement_policy == POD_REPLACEMENT_FAILED and failed > 0:
        return RECREATE_FAILED
    if failed > 0 or terminating > 0:
        return RECREATE_TERMINATING_OR_FAILED
    return CREATE_NEW


def record_pods_creation(reason: str, succeeded: int, failed: int) -> None:
    """recordJobPodsCreationTotal: one batch of creations."""
    if succeeded > 0:
        JOB_PODS_CREATION.labels(reason, SUCCEEDED).inc(succeeded)
    if failed > 0:
        JOB_PODS_CREATION.labels(reason, FAILED).inc(failed)


def record_pod_failure_policy_actions(counts: Iterable[tuple[str, int]]) -> None:
    """recordJobPodFailurePolicyActions: (action, pods) as the pod loop of
    trackJobStatusAndRemoveFinalizers counted them (tracking.RecordedPods)."""
    for action, count in counts:
        POD_FAILURES_HANDLED_BY_FAILURE_POLICY.labels(action).inc(count)


def backoff_limit_label(spec: JobSpec) -> str:
    """backoffLimitMetricsLabel (hasBackoffLimitPerIndex: spec.backoffLimitPerIndex set)."""
    if spec.backoff_limit_per_index is not None:
        return BACKOFF_LIMIT_PER_INDEX
    return BACKOFF_LIMIT_GLOBAL


def _indexes_count(indexes: str | None, completions: int) -> int:
    """indexesCount: the indexes below ``completions`` (0 for an unset failedIndexes)."""
    if indexes is None:
        return 0
    return intervals_total(parse_indexes_from_string(indexes, completions))


def finished_indexes(
    spec: JobSpec, before: JobStatus, after: JobStatus
) -> tuple[tuple[str, str, int], ...]:
    """The job_finished_indexes_total part of recordJobPodFinished for a status write from
    ``before`` to ``after``: (status, backoffLimit, amount) to add. Only Indexed jobs; the
    indexes are counted within the current completions (an index out of range after a
    scale-down is not counted). The succeeded series is always there (with 0 when no index
    succeeded), as upstream adds its diff unconditionally; the failed one only with
    backoffLimitPerIndex and when failedIndexes grew. Amounts never go negative (a Counter
    cannot decrease; upstream never has fewer indexes after a write either)."""
    if not spec.indexed or spec.completions is None:
        return ()
    completions = spec.completions
    label = backoff_limit_label(spec)
    succeeded = 0
    if after.completed_indexes != before.completed_indexes:
        succeeded = _indexes_count(after.completed_indexes, completions) - _indexes_count(
            before.completed_indexes, completions
        )
    out = [(SUCCEEDED, label, max(succeeded, 0))]
    if spec.backoff_limit_per_index is not None and after.failed_indexes != before.failed_indexes:
        failed = _indexes_count(after.failed_indexes, completions) - _indexes_count(
            before.failed_indexes, completions
        )
        if failed > 0:
            out.append((FAILED, label, failed))
    return tuple(out)


def record_finished_indexes(spec: JobSpec, before: JobStatus, after: JobStatus) -> None:
    """job_finished_indexes_total for a status write (see :func:`finished_indexes`)."""
    for status, label, amount in finished_indexes(spec, before, after):
        JOB_FINISHED_INDEXES.labels(status, label).inc(amount)


def record_job_added(external_controller: str | None) -> None:
    """addJob's jobs_by_external_controller_total: a job first seen whose spec.managedBy
    names another controller (managed_by.managed_by_external_controller), never the
    built-in Job controller, which upstream's counts as its own."""
    if external_controller is not None and external_controller != c.BUILTIN_JOB_CONTROLLER:
        JOBS_BY_EXTERNAL_CONTROLLER.labels(external_controller).inc()


@dataclass(frozen=True)
class ThreadTimes:
    """A thread's scheduler times so far (seconds): on a CPU, and ready to run but
    waiting for one (``/proc/thread-self/schedstat``'s first two fields)."""

    on_cpu: float
    waiting_for_cpu: float


def thread_times() -> ThreadTimes | None:
    """The calling thread's ThreadTimes, or None where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as stats:
            on_cpu, waiting = stats.read().split()[:2]
        return ThreadTimes(int(on_cpu) / 1e9, int(waiting) / 1e9)
    except (OSError, ValueError):
        return None


def own_part_of_lag(lag: float, before: ThreadTimes | None, after: ThreadTimes | None) -> float:
    """The part of a lag sample the loop's own computing caused: what its thread's wait
    for a CPU does not explain, and no more than the CPU time it used meanwhile (the
    rest it was off the CPU: blocked in a system call, e.g. a write to a full pipe). The
    whole lag when the thread's times are not known."""
    if before is None or after is None:
        return lag
    unexplained = max(0.0, lag - (after.waiting_for_cpu - before.waiting_for_cpu))
    return min(unexplained, after.on_cpu - before.on_cpu)


async def sample_loop_lag(
    interval: float = LOOP_LAG_SAMPLE_SECONDS,
    times: Callable[[], ThreadTimes | None] = thread_times,
) -> None:
    """Observes, forever, how late the event loop wakes a sleep that is due: the wait that
    every event, sync and API response shares when the loop is busy. One loop runs all
    the operator's work, so this is its saturation in one figure; the part of it the
    operator's own computing caused is told apart in EVENT_LOOP_BLOCKED."""
    loop = asyncio.get_running_loop()
    while True:
        before = times()
        due = loop.time() + interval
        await asyncio.sleep(interval)
        lag = max(0.0, loop.time() - due)
        EVENT_LOOP_LAG.observe(lag)
        EVENT_LOOP_BLOCKED.observe(own_part_of_lag(lag, before, times()))


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


def track_state(controllers: Sequence[ControllerState]) -> None:
    """The gauges are computed when scraped, from the controllers' state (one per kind
    of job: their sum)."""
    JOBS.set_function(lambda: float(sum(len(c.jobs) for c in controllers)))
    JOBS_PENDING_SYNC.set_function(lambda: float(sum(c.pending_syncs() for c in controllers)))
    DURATION_REFRESH_WAITING.set_function(
        lambda: float(sum(c.duration_refresh_waiting() for c in controllers))
    )
    PROGRESS_WRITE_WAITING.set_function(
        lambda: float(sum(c.progress_write_waiting() for c in controllers))
    )


async def serve(port: int, *, address: str) -> web.AppRunner:
    """Serves ``/metrics`` on ``address:port`` (``--bind-address``, ``--metrics-port``)
    inside the operator's event loop."""
    app = web.Application()
    app.router.add_get("/metrics", make_aiohttp_handler())
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, address, port).start()
    return runner
