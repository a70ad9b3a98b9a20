"""The ParallelJob and its pods as plain immutable values, parsed from API dicts.

Nothing here does I/O. ``parse_job`` and ``parse_pod`` turn the JSON the API server
returns into the values the decision core works on; ``status_to_dict`` turns a status
back into the body of a status patch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from . import constants as c
from .json_types import JsonDict
from .timeutil import format_time, parse_time


@dataclass(frozen=True)
class JobSpec:
    """The effective spec, upstream defaults applied."""

    parallelism: int = 1
    completions: int | None = 1
    backoff_limit: int = 6
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    suspend: bool = False
    restart_policy: str = "Never"


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: datetime | None = None
    last_probe_time: datetime | None = None


@dataclass(frozen=True)
class JobStatus:
    conditions: tuple[Condition, ...] = ()
    start_time: datetime | None = None
    completion_time: datetime | None = None
    active: int = 0
    ready: int = 0
    terminating: int = 0
    succeeded: int = 0
    failed: int = 0
    #: Pods recorded as finished whose finalizer may still be on (step 1 of 3).
    uncounted_succeeded: tuple[str, ...] = ()
    uncounted_failed: tuple[str, ...] = ()
    #: The pod-failure back-off, persisted so that it survives a restart.
    failures_since_success: int = 0
    last_failure_time: datetime | None = None
    selector: str = ""
    observed_generation: int = 0
    # What `kubectl get pj` prints (the printer columns read these).
    status_text: str = ""
    completions_text: str = ""
    duration_text: str = ""


@dataclass(frozen=True)
class Job:
    namespace: str
    name: str
    uid: str
    spec: JobSpec = field(default_factory=JobSpec)
    status: JobStatus = field(default_factory=JobStatus)
    generation: int = 1
    resource_version: str = ""
    deleting: bool = False


@dataclass(frozen=True)
class PodInfo:
    """What the controller needs to know about one pod (kept in the pod index)."""

    name: str
    uid: str
    phase: str = c.PENDING
    deleting: bool = False
    has_finalizer: bool = True
    ready: bool = False
    ready_since: datetime | None = None
    node_assigned: bool = False
    #: Sum of restartCount over init and regular containers (OnFailure accounting).
    restarts: int = 0
    #: Highest restartCount of a regular container (scale-down ordering).
    max_restarts: int = 0
    created: datetime | None = None
    #: When the pod finished, as upstream's getFinishedTime estimates it.
    finished_at: datetime | None = None
    namespace: str = ""
    #: The job uid in the pod's paralleljob.dev/controller-uid label ("": no label).
    label_uid: str = ""
    #: The uid of the pod's controller (its ownerReference with controller: true).
    controller_uid: str | None = None

    @property
    def active(self) -> bool:
        return self.phase not in (c.SUCCEEDED, c.FAILED) and not self.deleting

    @property
    def terminating(self) -> bool:
        return self.deleting and self.phase not in (c.SUCCEEDED, c.FAILED)

    @property
    def failed(self) -> bool:
        """isPodFailed: Failed, or deleted before it could succeed."""
        return self.phase == c.FAILED or (self.deleting and self.phase != c.SUCCEEDED)


def _int(value: object, default: int | None) -> int | None:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    return default


def _as_dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _as_list(value: object) -> Sequence[Any]:
    return value if isinstance(value, list) else []


def parse_spec(spec: Mapping[str, Any]) -> JobSpec:
    """Applies upstream's defaults: parallelism 1; both unset means both 1; backoffLimit 6."""
    parallelism = _int(spec.get("parallelism"), None)
    completions = _int(spec.get("completions"), None)
    if parallelism is None and completions is None:
        completions = 1
    if parallelism is None:
        parallelism = 1
    template_spec = _as_dict(_as_dict(spec.get("template")).get("spec"))
    restart_policy = template_spec.get("restartPolicy")
    return JobSpec(
        parallelism=max(parallelism, 0),
        completions=None if completions is None else max(completions, 0),
        backoff_limit=max(_int(spec.get("backoffLimit"), 6) or 0, 0),
        active_deadline_seconds=_int(spec.get("activeDeadlineSeconds"), None),
        ttl_seconds_after_finished=_int(spec.get("ttlSecondsAfterFinished"), None),
        suspend=spec.get("suspend") is True,
        restart_policy=restart_policy if isinstance(restart_policy, str) else "Never",
    )


def spec_defaults_patch(spec: Mapping[str, Any]) -> JsonDict | None:
    """The spec fields upstream's API defaulting would have written, or None.

    A CRD default cannot express "when both are unset both default to 1", so the
    operator writes parallelism (and completions, when both are unset) itself before
    it acts on a job, and the stored object then reads like a defaulted batch/v1 Job.
    """
    if spec.get("parallelism") is not None:
        return None
    patch: JsonDict = {"parallelism": 1}
    if spec.get("completions") is None:
        patch["completions"] = 1
    return patch


def parse_condition(raw: Mapping[str, Any]) -> Condition:
    return Condition(
        type=str(raw.get("type", "")),
        status=str(raw.get("status", "")),
        reason=str(raw.get("reason", "") or ""),
        message=str(raw.get("message", "") or ""),
        last_transition_time=parse_time(raw.get("lastTransitionTime")),
        last_probe_time=parse_time(raw.get("lastProbeTime")),
    )


def parse_status(status: Mapping[str, Any]) -> JobStatus:
    uncounted = _as_dict(status.get("uncountedTerminatedPods"))
    backoff = _as_dict(status.get("podFailureBackoff"))
    return JobStatus(
        conditions=tuple(parse_condition(_as_dict(x)) for x in _as_list(status.get("conditions"))),
        start_time=parse_time(status.get("startTime")),
        completion_time=parse_time(status.get("completionTime")),
        active=_int(status.get("active"), 0) or 0,
        ready=_int(status.get("ready"), 0) or 0,
        terminating=_int(status.get("terminating"), 0) or 0,
        succeeded=_int(status.get("succeeded"), 0) or 0,
        failed=_int(status.get("failed"), 0) or 0,
        uncounted_succeeded=tuple(str(x) for x in _as_list(uncounted.get("succeeded"))),
        uncounted_failed=tuple(str(x) for x in _as_list(uncounted.get("failed"))),
        failures_since_success=_int(backoff.get("failuresSinceLastSuccess"), 0) or 0,
        last_failure_time=parse_time(backoff.get("lastFailureTime")),
        selector=str(status.get("selector", "") or ""),
        observed_generation=_int(status.get("observedGeneration"), 0) or 0,
        status_text=str(status.get("statusText", "") or ""),
        completions_text=str(status.get("completionsText", "") or ""),
        duration_text=str(status.get("durationText", "") or ""),
    )


def parse_job(body: Mapping[str, Any]) -> Job:
    meta = _as_dict(body.get("metadata"))
    return Job(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        generation=_int(meta.get("generation"), 1) or 1,
        resource_version=str(meta.get("resourceVersion", "") or ""),
        deleting=meta.get("deletionTimestamp") is not None,
        spec=parse_spec(_as_dict(body.get("spec"))),
        status=parse_status(_as_dict(body.get("status"))),
    )


def _condition_true(status: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    for cond in _as_list(status.get("conditions")):
        cond = _as_dict(cond)
        if cond.get("type") == ctype and cond.get("status") == "True":
            return cond
    return None


def _container_finish_time(statuses: Sequence[Any]) -> datetime | None:
    """Latest finishedAt if every container terminated (getFinishTimeFromContainers)."""
    latest: datetime | None = None
    for raw in statuses:
        terminated = _as_dict(_as_dict(_as_dict(raw).get("state")).get("terminated"))
        finished = parse_time(terminated.get("finishedAt"))
        if finished is None:
            return None
        if latest is None or finished > latest:
            latest = finished
    return latest


def _finished_at(meta: Mapping[str, Any], status: Mapping[str, Any]) -> datetime | None:
    """upstream getFinishedTime: containers, Ready=False, deletion - grace, creation."""
    finished = _container_finish_time(_as_list(status.get("containerStatuses")))
    if finished is not None:
        return finished
    for cond in _as_list(status.get("conditions")):
        cond = _as_dict(cond)
        if cond.get("type") == "Ready" and cond.get("status") == "False":
            when = parse_time(cond.get("lastTransitionTime"))
            if when is not None:
                return when
    deleted = parse_time(meta.get("deletionTimestamp"))
    if deleted is not None:
        grace = _int(meta.get("deletionGracePeriodSeconds"), 0) or 0
        return deleted - timedelta(seconds=grace)
    return parse_time(meta.get("creationTimestamp"))


def parse_pod(body: Mapping[str, Any]) -> PodInfo:
    meta = _as_dict(body.get("metadata"))
    spec = _as_dict(body.get("spec"))
    status = _as_dict(body.get("status"))
    phase = str(status.get("phase") or c.PENDING)
    containers = _as_list(status.get("containerStatuses"))
    init_containers = _as_list(status.get("initContainerStatuses"))
    restarts = [_int(_as_dict(s).get("restartCount"), 0) or 0 for s in containers]
    init_restarts = [_int(_as_dict(s).get("restartCount"), 0) or 0 for s in init_containers]
    ready_cond = _condition_true(status, "Ready")
    finished = phase in (c.SUCCEEDED, c.FAILED) or meta.get("deletionTimestamp") is not None
    return PodInfo(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        phase=phase,
        deleting=meta.get("deletionTimestamp") is not None,
        has_finalizer=c.TRACKING_FINALIZER in _as_list(meta.get("finalizers")),
        ready=ready_cond is not None,
        ready_since=parse_time(ready_cond.get("lastTransitionTime")) if ready_cond else None,
        node_assigned=bool(spec.get("nodeName")),
        restarts=sum(restarts) + sum(init_restarts),
        max_restarts=max(restarts, default=0),
        created=parse_time(meta.get("creationTimestamp")),
        finished_at=_finished_at(meta, status) if finished else None,
        namespace=str(meta.get("namespace", "")),
        label_uid=str(_as_dict(meta.get("labels")).get(c.LABEL_CONTROLLER_UID, "")),
        controller_uid=controller_uid(meta),
    )


def controller_uid(meta: Mapping[str, Any]) -> str | None:
    """metav1.GetControllerOf: the uid of the ownerReference marked controller."""
    for ref in _as_list(meta.get("ownerReferences")):
        ref = _as_dict(ref)
        if ref.get("controller") is True:
            return str(ref.get("uid", ""))
    return None


def condition_to_dict(cond: Condition) -> JsonDict:
    out: JsonDict = {"type": cond.type, "status": cond.status}
    if cond.reason:
        out["reason"] = cond.reason
    if cond.message:
        out["message"] = cond.message
    if cond.last_transition_time is not None:
        out["lastTransitionTime"] = format_time(cond.last_transition_time)
    if cond.last_probe_time is not None:
        out["lastProbeTime"] = format_time(cond.last_probe_time)
    return out


def status_to_dict(status: JobStatus) -> JsonDict:
    """The complete status, as the body of a merge patch on the status subresource.

    Absent optional values are sent as ``None`` so that a merge patch clears them.
    """
    return {
        "conditions": [condition_to_dict(x) for x in status.conditions],
        "startTime": format_time(status.start_time) if status.start_time else None,
        "completionTime": format_time(status.completion_time) if status.completion_time else None,
        "active": status.active,
        "ready": status.ready,
        "terminating": status.terminating,
        "succeeded": status.succeeded,
        "failed": status.failed,
        "uncountedTerminatedPods": {
            "succeeded": list(status.uncounted_succeeded),
            "failed": list(status.uncounted_failed),
        },
        "podFailureBackoff": {
            "failuresSinceLastSuccess": status.failures_since_success,
            "lastFailureTime": (
                format_time(status.last_failure_time) if status.last_failure_time else None
            ),
        },
        "selector": status.selector,
        "observedGeneration": status.observed_generation,
        "statusText": status.status_text,
        "completionsText": status.completions_text,
        "durationText": status.duration_text,
    }


def find_condition(conditions: Sequence[Condition], ctype: str) -> Condition | None:
    for cond in conditions:
        if cond.type == ctype:
            return cond
    return None


def has_true_condition(conditions: Sequence[Condition], ctype: str) -> bool:
    cond = find_condition(conditions, ctype)
    return cond is not None and cond.status == "True"


def is_finished(status: JobStatus) -> bool:
    """util.IsJobFinished: a Complete or Failed condition that is True."""
    return has_true_condition(status.conditions, c.COND_COMPLETE) or has_true_condition(
        status.conditions, c.COND_FAILED
    )


def selector_for(uid: str) -> str:
    """The label selector (string form) of a job's pods, exposed through /scale."""
    return f"{c.LABEL_CONTROLLER_UID}={uid}"
