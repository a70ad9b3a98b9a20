"""The pure decision core: upstream's ``pkg/controller/job`` ported to Python.

Given a job, its pods, the time and what the last API calls achieved, it says what to
do next. Nothing here does I/O: it imports only the package's leaves (``config``,
``constants``, ``json_types``, ``timeutil``) and itself (tests/unit/test_layers.py).
"""

from .backoff import delay_seconds
from .intervals import intervals_total, parse_indexes_from_string
from .kind import PARALLELJOB, WATCH_LABEL, JobKind, batch_job, kind_of_pod
from .managed_by import managed_by_external_controller
from .model import (
    INDEXED_COMPLETION,
    NON_INDEXED_COMPLETION,
    POD_REPLACEMENT_FAILED,
    Condition,
    Job,
    JobSpec,
    JobStatus,
    PodInfo,
    is_finished,
    parse_job,
    parse_pod,
    parse_spec,
    parse_status,
    spec_defaults_patch,
    status_to_dict,
)
from .pods import build_pod, job_template, new_pod_bodies
from .sync import (
    Event,
    PodOutcome,
    PodPlan,
    SyncContext,
    SyncInput,
    SyncResult,
    Tracked,
    count_and_enact,
    plan_pods,
    sync_context,
    track,
)

#: What the shell calls: one sync's steps and their values, the job and its pods as
#: values and their parsers, the kinds of job, spec.managedBy, the pod bodies, the
#: ordered intervals.
__all__ = [
    "INDEXED_COMPLETION",
    "NON_INDEXED_COMPLETION",
    "PARALLELJOB",
    "POD_REPLACEMENT_FAILED",
    "WATCH_LABEL",
    "Condition",
    "Event",
    "Job",
    "JobKind",
    "JobSpec",
    "JobStatus",
    "PodInfo",
    "PodOutcome",
    "PodPlan",
    "SyncContext",
    "SyncInput",
    "SyncResult",
    "Tracked",
    "batch_job",
    "build_pod",
    "count_and_enact",
    "delay_seconds",
    "intervals_total",
    "is_finished",
    "job_template",
    "kind_of_pod",
    "managed_by_external_controller",
    "new_pod_bodies",
    "parse_indexes_from_string",
    "parse_job",
    "parse_pod",
    "parse_spec",
    "parse_status",
    "plan_pods",
    "spec_defaults_patch",
    "status_to_dict",
    "sync_context",
    "track",
]
