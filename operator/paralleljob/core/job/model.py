"""The ParallelJob and its pods as plain immutable values, parsed from API dicts.

Nothing here does I/O. ``parse_job`` and ``parse_pod`` turn the JSON the API server
returns into the values the decision core works on; ``status_to_dict`` turns a status
back into the body of a status patch.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Protocol

from ... import constants as c
from ...json_types import JsonDict, as_dict, as_list
from ...timeutil import format_time, parse_time
from .job_restart_policy import JobRestartPolicy, attempt_of, parse_job_restart_policy
from .pod_failure_policy import (
    PodFailureFacts,
    PodFailurePolicy,
    parse_pod_failure_policy,
    pod_failure_facts,
)

log = logging.getLogger(__name__)

# batch/v1 CompletionMode.
NON_INDEXED_COMPLETION: Final = "NonIndexed"
INDEXED_COMPLETION: Final = "Indexed"
# batch/v1 PodReplacementPolicy.
POD_REPLACEMENT_TERMINATING_OR_FAILED: Final = "TerminatingOrFailed"
#: Replace a pod only once it has failed (not while it terminates).
POD_REPLACEMENT_FAILED: Final = "Failed"

_MAX_INT32: Final = 2**31 - 1


@dataclass(frozen=True)
class SuccessPolicyRule:
    """batch/v1 SuccessPolicyRule: None means the field is unset and never evaluated."""

    succeeded_indexes: str | None = None
    succeeded_count: int | None = None


@dataclass(frozen=True)
class SuccessPolicy:
    """batch/v1 SuccessPolicy: alternative rules, evaluated in order (success_policy.py
    says whether a job meets one)."""

    rules: tuple[SuccessPolicyRule, ...] = ()


@dataclass(frozen=True)
class PodFailureBackoff:
    """spec.podFailureBackoff (not in the Job; kubernetes#94012): the job's own base and
    cap of the pod-failure back-off, in seconds; None where unset (the operator's
    PJ_POD_BACKOFF_BASE_SECONDS / PJ_POD_BACKOFF_MAX_SECONDS apply)."""

    initial_seconds: int | None = None
    max_seconds: int | None = None


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
    #: spec.completionMode: NonIndexed or Indexed (anything else runs as NonIndexed;
    #: the CRD's enum keeps it out).
    completion_mode: str = NON_INDEXED_COMPLETION
    #: spec.podReplacementPolicy: TerminatingOrFailed, or Failed (the default when a
    #: podFailurePolicy is set, as upstream's SetDefaults_Job).
    pod_replacement_policy: str = POD_REPLACEMENT_TERMINATING_OR_FAILED
    #: spec.successPolicy (Indexed jobs only).
    success_policy: SuccessPolicy | None = None
    #: spec.backoffLimitPerIndex and spec.maxFailedIndexes (Indexed jobs only).
    backoff_limit_per_index: int | None = None
    max_failed_indexes: int | None = None
    #: spec.podFailurePolicy (pod_failure_policy.py matches a failed pod's rule).
    pod_failure_policy: PodFailurePolicy | None = None
    #: spec.managedBy: None or the operator's own value (constants.MANAGED_BY) mean
    #: this operator; any other value, another controller (managed_by.py).
    managed_by: str | None = None
    #: spec.podFailureBackoff (None: unset).
    pod_failure_backoff: PodFailureBackoff | None = None
    #: spec.podStartDeadlineSeconds (not in the Job; None: unset): a pod not started this
    #: long after its creation is failed and deleted (pod_start_deadline.py).
    pod_start_deadline_seconds: int | None = None
    #: spec.restartPolicy (not in the Job; None: unset): a failed job starts again from
    #: nothing, so many times (job_restarts.py). Not the template's restartPolicy.
    job_restart: JobRestartPolicy | None = None
    #: The pod template's container names and images, each comma-joined as kubectl's
    #: printJob lays them out (status.containersText, status.imagesText).
    containers_text: str = ""
    images_text: str = ""

    @property
    def indexed(self) -> bool:
        """isIndexedJob. An Indexed job without completions (the API forbids it) runs
        as NonIndexed rather than failing every sync."""
        return self.completion_mode == INDEXED_COMPLETION and self.completions is not None

    @property
    def only_replace_failed(self) -> bool:
        """onlyReplaceFailedPods: podReplacementPolicy Failed (Kubernetes 1.37 dropped
        the podFailurePolicy fallback: parse_spec defaults the policy to Failed with
        one, and the API requires it). Such a job neither counts a terminating pod as
        failed nor replaces it until it has failed."""
        return self.pod_replacement_policy == POD_REPLACEMENT_FAILED


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
    #: Indexed jobs: the succeeded indexes, "1,3-5" ("" when none, as upstream omits it).
    completed_indexes: str = ""
    #: status.failedIndexes (None: unset). Set, "" when no index failed, only for an
    #: Indexed job with backoffLimitPerIndex (upstream's pointer to ""); cleared otherwise.
    failed_indexes: str | None = None
    #: The pod-failure back-off, persisted so that it survives a restart.
    failures_since_success: int = 0
    last_failure_time: datetime | None = None
    #: status.restarts (not in the Job): how often spec.restartPolicy restarted the job.
    restarts: int = 0
    selector: str = ""
    observed_generation: int = 0
    # What `kubectl get pj` prints (the printer columns read these).
    status_text: str = ""
    completions_text: str = ""
    duration_text: str = ""
    # What `kubectl get pj -o wide` prints for the template (set once, with other writes).
    containers_text: str = ""
    images_text: str = ""


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


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the controller needs to know about one pod (kept in the pod index, one per
    pod: slotted, and its repeated strings shared, see parse_pod)."""

    name: str
    uid: str
    phase: str = c.PENDING
    deleting: bool = False
    has_finalizer: bool = True
    ready: bool = False
    ready_since: datetime | None = None
    node_assigned: bool = False
    #: One of the pod's regular containers is running or has run: the pod has started,
    #: whatever its phase says (spec.podStartDeadlineSeconds reads it). An init
    #: container, a native sidecar (an init container with restartPolicy Always)
    #: included, does not count: it may run while the main container is never pulled.
    started: bool = False
    #: The pod's resourceVersion while it has not started ("" after): the version a
    #: start deadline's Failed PATCH is conditional on. A started pod keeps none, so
    #: that running pods cost no more memory.
    unstarted_version: str = ""
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
    #: Indexed jobs (from the pod's annotations): getCompletionIndex, None for a missing,
    #: invalid or negative index (upstream's -1); the index's failure counts.
    completion_index: int | None = None
    index_failure_count: int = 0
    index_ignored_failure_count: int = 0
    #: What a pod failure policy matches (exit codes, pod conditions): only for a pod
    #: that failed, is being deleted or has a container that exited non-zero (see
    #: needs_failure_facts), so that running pods cost no more memory; else None.
    failure: PodFailureFacts | None = None
    #: controller.kubernetes.io/pod-deletion-cost (get_deletion_cost): a ParallelJob's
    #: scale-down removes the lowest first. 0 when missing or invalid.
    deletion_cost: int = 0
    #: The attempt of the job that created the pod (spec.restartPolicy; 0: the first).
    attempt: int = 0

    @property
    def active(self) -> bool:
        return self.phase not in (c.SUCCEEDED, c.FAILED) and not self.deleting

    @property
    def terminating(self) -> bool:
        return self.deleting and self.phase not in (c.SUCCEEDED, c.FAILED)

    @property
    def failed(self) -> bool:
        """isPodFailed for a job that replaces terminating pods (see is_pod_failed)."""
        return is_pod_failed(self, only_replace_failed=False)


def is_pod_failed(pod: PodInfo, *, only_replace_failed: bool) -> bool:
    """isPodFailed (job_controller.go): Failed; or, unless only failed pods are replaced
    (JobSpec.only_replace_failed), deleted before it could succeed (an orphan may never
    reach the Failed phase)."""
    if pod.phase == c.FAILED:
        return True
    if only_replace_failed:
        return False
    return pod.deleting and pod.phase != c.SUCCEEDED


# ------------------------------------------------------------------ index annotations
# strconv.Atoi: an optional sign and ASCII decimal digits, within int64. Python's int()
# would also take spaces, underscores and other scripts' digits.
_ATOI = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def atoi(text: str) -> int | None:
    """strconv.Atoi; None where Go returns an error."""
    if _ATOI.fullmatch(text) is None:
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def get_completion_index(annotations: Mapping[str, Any] | None, key: str) -> int | None:
    """getCompletionIndex (indexed_job_utils.go): the index in the completion-index
    annotation ``key`` (JobKind.completion_index_key), or None (upstream
    unknownCompletionIndex) when it is missing, not an integer or negative.

    Upstream reads only the annotation, never the label of the same name.
    """
    value = (annotations or {}).get(key)
    if not isinstance(value, str):
        return None
    index = atoi(value)
    if index is None or index < 0:
        return None
    return index


def _parse_int32(value: str) -> int:
    """parseInt32: 0 for anything that is not an integer in [0, MaxInt32]; a user may
    have written the annotation."""
    parsed = atoi(value)
    if parsed is None:
        log.error("Failed to parse the value: %r", value)
        return 0
    if parsed < 0 or parsed > _MAX_INT32:
        log.info("The value is invalid: %d", parsed)
        return 0
    return parsed


def _parse_count_annotation(annotations: Mapping[str, Any] | None, key: str) -> int:
    value = (annotations or {}).get(key)
    return _parse_int32(value) if isinstance(value, str) else 0


def get_index_failure_count(annotations: Mapping[str, Any] | None, key: str) -> int:
    """getIndexFailureCount (parseIndexFailureCountAnnotation): the index-failure-count
    annotation ``key``, 0 when it is missing, unparsable, negative or above MaxInt32."""
    return _parse_count_annotation(annotations, key)


def get_index_ignored_failure_count(annotations: Mapping[str, Any] | None, key: str) -> int:
    """parseIndexFailureIgnoreCountAnnotation, with the same fallbacks to 0."""
    return _parse_count_annotation(annotations, key)


def _int(value: object, default: int | None) -> int | None:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    return default


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _parse_success_rule(raw: object) -> SuccessPolicyRule:
    # A malformed rule keeps its place, so later rules keep their index (the index is in
    # the condition message); with neither field set it matches nothing.
    rule = as_dict(raw)
    return SuccessPolicyRule(
        succeeded_indexes=_str(rule.get("succeededIndexes")),
        # bool is an int in Python, never in JSON.
        succeeded_count=_int(rule.get("succeededCount"), None),
    )


def parse_success_policy(spec: Mapping[str, Any]) -> SuccessPolicy | None:
    """``spec.successPolicy`` of a job's spec (batch/v1 JSON), None when unset."""
    raw = spec.get("successPolicy")
    if raw is None:
        return None
    rules = as_dict(raw).get("rules")
    return SuccessPolicy(rules=tuple(_parse_success_rule(r) for r in as_list(rules)))


def parse_pod_failure_backoff(spec: Mapping[str, Any]) -> PodFailureBackoff | None:
    """``spec.podFailureBackoff`` (initialSeconds, maxSeconds), None when unset; a field
    that is not a positive integer is unset (the CRD's minimum is 1)."""
    raw = spec.get("podFailureBackoff")
    if not isinstance(raw, Mapping):
        return None
    initial = _int(raw.get("initialSeconds"), None)
    cap = _int(raw.get("maxSeconds"), None)
    return PodFailureBackoff(
        initial_seconds=initial if initial is not None and initial > 0 else None,
        max_seconds=cap if cap is not None and cap > 0 else None,
    )


def _positive_int(value: object) -> int | None:
    """A field whose CRD minimum is 1: None unless a positive integer (a value an older
    CRD let through is taken as unset, not as "at once")."""
    parsed = _int(value, None)
    return parsed if parsed is not None and parsed > 0 else None


def template_texts(spec: Mapping[str, Any]) -> tuple[str, str]:
    """layoutContainerCells (kubectl's printJob, -o wide): the names and the images of
    spec.template.spec.containers, each joined by "," (a missing one as "")."""
    template_spec = as_dict(as_dict(spec.get("template")).get("spec"))
    containers = [as_dict(x) for x in as_list(template_spec.get("containers"))]
    names = ",".join(_str(x.get("name")) or "" for x in containers)
    images = ",".join(_str(x.get("image")) or "" for x in containers)
    return names, images


def _default_pod_replacement_policy(pod_failure_policy: object) -> str:
    """SetDefaults_Job: Failed with a podFailurePolicy, else TerminatingOrFailed."""
    if pod_failure_policy is not None:
        return POD_REPLACEMENT_FAILED
    return POD_REPLACEMENT_TERMINATING_OR_FAILED


def parse_spec(spec: Mapping[str, Any]) -> JobSpec:
    """Applies upstream's defaults (SetDefaults_Job): parallelism 1; both unset means
    both 1; backoffLimit 6 (MaxInt32 with backoffLimitPerIndex); completionMode
    NonIndexed; podReplacementPolicy Failed with a podFailurePolicy, else
    TerminatingOrFailed."""
    parallelism = _int(spec.get("parallelism"), None)
    completions = _int(spec.get("completions"), None)
    if parallelism is None and completions is None:
        completions = 1
    if parallelism is None:
        parallelism = 1
    template_spec = as_dict(as_dict(spec.get("template")).get("spec"))
    restart_policy = template_spec.get("restartPolicy")
    per_index = _int(spec.get("backoffLimitPerIndex"), None)
    default_backoff_limit = 6 if per_index is None else _MAX_INT32
    pod_failure_policy = parse_pod_failure_policy(spec)
    containers_text, images_text = template_texts(spec)
    return JobSpec(
        parallelism=max(parallelism, 0),
        completions=None if completions is None else max(completions, 0),
        backoff_limit=max(_int(spec.get("backoffLimit"), default_backoff_limit) or 0, 0),
        active_deadline_seconds=_int(spec.get("activeDeadlineSeconds"), None),
        ttl_seconds_after_finished=_int(spec.get("ttlSecondsAfterFinished"), None),
        suspend=spec.get("suspend") is True,
        restart_policy=restart_policy if isinstance(restart_policy, str) else "Never",
        completion_mode=_str(spec.get("completionMode")) or NON_INDEXED_COMPLETION,
        pod_replacement_policy=(
            _str(spec.get("podReplacementPolicy"))
            or _default_pod_replacement_policy(pod_failure_policy)
        ),
        success_policy=parse_success_policy(spec),
        backoff_limit_per_index=per_index,
        max_failed_indexes=_int(spec.get("maxFailedIndexes"), None),
        pod_failure_policy=pod_failure_policy,
        managed_by=_str(spec.get("managedBy")),
        pod_failure_backoff=parse_pod_failure_backoff(spec),
        pod_start_deadline_seconds=_positive_int(spec.get("podStartDeadlineSeconds")),
        job_restart=parse_job_restart_policy(spec),
        containers_text=containers_text,
        images_text=images_text,
    )


def spec_defaults_patch(spec: Mapping[str, Any]) -> JsonDict | None:
    """The spec fields upstream's API defaulting would have written, or None.

    A CRD default cannot express "when both are unset both default to 1", nor
    "podReplacementPolicy Failed when a podFailurePolicy is set", nor "backoffLimit
    MaxInt32 when backoffLimitPerIndex is set" (SetDefaults_Job), so the operator writes
    those itself before it acts on a job (and completionMode, should a CRD not default
    it). An unset podReplacementPolicy without a podFailurePolicy, and an unset
    backoffLimit without backoffLimitPerIndex, are not written (parse_spec reads them as
    TerminatingOrFailed and 6): writing them would cost every plain job one more write.
    """
    patch: JsonDict = {}
    if spec.get("parallelism") is None:
        patch["parallelism"] = 1
        if spec.get("completions") is None:
            patch["completions"] = 1
    if spec.get("completionMode") is None:
        patch["completionMode"] = NON_INDEXED_COMPLETION
    if spec.get("podReplacementPolicy") is None and spec.get("podFailurePolicy") is not None:
        patch["podReplacementPolicy"] = POD_REPLACEMENT_FAILED
    if spec.get("backoffLimit") is None and spec.get("backoffLimitPerIndex") is not None:
        patch["backoffLimit"] = _MAX_INT32
    return patch or None


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
    uncounted = as_dict(status.get("uncountedTerminatedPods"))
    backoff = as_dict(status.get("podFailureBackoff"))
    return JobStatus(
        conditions=tuple(parse_condition(as_dict(x)) for x in as_list(status.get("conditions"))),
        start_time=parse_time(status.get("startTime")),
        completion_time=parse_time(status.get("completionTime")),
        active=_int(status.get("active"), 0) or 0,
        ready=_int(status.get("ready"), 0) or 0,
        terminating=_int(status.get("terminating"), 0) or 0,
        succeeded=_int(status.get("succeeded"), 0) or 0,
        failed=_int(status.get("failed"), 0) or 0,
        uncounted_succeeded=tuple(str(x) for x in as_list(uncounted.get("succeeded"))),
        uncounted_failed=tuple(str(x) for x in as_list(uncounted.get("failed"))),
        completed_indexes=_str(status.get("completedIndexes")) or "",
        failed_indexes=_str(status.get("failedIndexes")),
        failures_since_success=_int(backoff.get("failuresSinceLastSuccess"), 0) or 0,
        last_failure_time=parse_time(backoff.get("lastFailureTime")),
        restarts=_int(status.get("restarts"), 0) or 0,
        selector=str(status.get("selector", "") or ""),
        observed_generation=_int(status.get("observedGeneration"), 0) or 0,
        status_text=str(status.get("statusText", "") or ""),
        completions_text=str(status.get("completionsText", "") or ""),
        duration_text=str(status.get("durationText", "") or ""),
        containers_text=str(status.get("containersText", "") or ""),
        images_text=str(status.get("imagesText", "") or ""),
    )


def parse_job(body: Mapping[str, Any]) -> Job:
    meta = as_dict(body.get("metadata"))
    return Job(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        generation=_int(meta.get("generation"), 1) or 1,
        resource_version=str(meta.get("resourceVersion", "") or ""),
        deleting=meta.get("deletionTimestamp") is not None,
        spec=parse_spec(as_dict(body.get("spec"))),
        status=parse_status(as_dict(body.get("status"))),
    )


def _condition_true(status: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    for cond in as_list(status.get("conditions")):
        cond = as_dict(cond)
        if cond.get("type") == ctype and cond.get("status") == "True":
            return cond
    return None


def _container_finish_time(statuses: Sequence[Any]) -> datetime | None:
    """Latest finishedAt if every container terminated (getFinishTimeFromContainers)."""
    latest: datetime | None = None
    for raw in statuses:
        terminated = as_dict(as_dict(as_dict(raw).get("state")).get("terminated"))
        finished = parse_time(terminated.get("finishedAt"))
        if finished is None:
            return None
        if latest is None or finished > latest:
            latest = finished
    return latest


def _finished_at(meta: Mapping[str, Any], status: Mapping[str, Any]) -> datetime | None:
    """upstream getFinishedTime: containers, Ready=False, deletion - grace, creation."""
    finished = _container_finish_time(as_list(status.get("containerStatuses")))
    if finished is not None:
        return finished
    for cond in as_list(status.get("conditions")):
        cond = as_dict(cond)
        if cond.get("type") == "Ready" and cond.get("status") == "False":
            when = parse_time(cond.get("lastTransitionTime"))
            if when is not None:
                return when
    deleted = parse_time(meta.get("deletionTimestamp"))
    if deleted is not None:
        grace = _int(meta.get("deletionGracePeriodSeconds"), 0) or 0
        return deleted - timedelta(seconds=grace)
    return parse_time(meta.get("creationTimestamp"))


def _exited_non_zero(statuses: Sequence[Any]) -> bool:
    """A container of ``statuses`` terminated with an exit code other than 0 (the only
    ones a pod failure policy's onExitCodes can match)."""
    for raw in statuses:
        terminated = as_dict(as_dict(as_dict(raw).get("state")).get("terminated"))
        if terminated and terminated.get("exitCode", 0) != 0:
            return True
    return False


def _container_started(statuses: Sequence[Any]) -> bool:
    """A container of ``statuses`` is running, has terminated, or terminated before its
    restart (lastState): it got to run. One still waiting (pulling its image, being
    created) has not."""
    for raw in statuses:
        status = as_dict(raw)
        state = as_dict(status.get("state"))
        if "running" in state or "terminated" in state:
            return True
        if "terminated" in as_dict(status.get("lastState")):
            return True
    return False


def needs_failure_facts(
    phase: str, deleting: bool, containers: Sequence[Any], init_containers: Sequence[Any]
) -> bool:
    """Whether parse_pod keeps what a pod failure policy matches. A policy is matched
    against a Failed pod (isPodFailed, since a policy makes only failed pods count), and
    against any pod a failing job still tracks (trackJobStatusAndRemoveFinalizers): those
    being deleted, whose exit codes and conditions (DisruptionTarget) matter. A running
    pod keeps them only once a container exited non-zero; the others match no onExitCodes
    rule, and are taken as having no pod condition (see the docs of PodInfo.failure)."""
    return (
        phase == c.FAILED
        or deleting
        or _exited_non_zero(containers)
        or _exited_non_zero(init_containers)
    )


class PodKeys(Protocol):
    """The keys a kind of job puts on its pods, as parse_pod reads them (a
    :class:`~paralleljob.core.job.kind.JobKind` is one; declared here so that the model does
    not import the kinds, which are built on it)."""

    @property
    def finalizers(self) -> tuple[str, ...]: ...
    @property
    def controller_uid_label(self) -> str: ...
    @property
    def completion_index_key(self) -> str: ...
    @property
    def index_failure_count_key(self) -> str: ...
    @property
    def index_ignored_failure_count_key(self) -> str: ...


def parse_pod(body: Mapping[str, Any], kind: PodKeys) -> PodInfo:
    """The fields of a pod the core reads, its tracking finalizer, job label and index
    annotations those of ``kind``."""
    meta = as_dict(body.get("metadata"))
    spec = as_dict(body.get("spec"))
    status = as_dict(body.get("status"))
    phase = str(status.get("phase") or c.PENDING)
    containers = as_list(status.get("containerStatuses"))
    init_containers = as_list(status.get("initContainerStatuses"))
    restarts = [_int(as_dict(s).get("restartCount"), 0) or 0 for s in containers]
    init_restarts = [_int(as_dict(s).get("restartCount"), 0) or 0 for s in init_containers]
    annotations = as_dict(meta.get("annotations"))
    ready_cond = _condition_true(status, "Ready")
    deleting = meta.get("deletionTimestamp") is not None
    finished = phase in (c.SUCCEEDED, c.FAILED) or deleting
    facts = needs_failure_facts(phase, deleting, containers, init_containers)
    started = _container_started(containers)
    # The strings many pods repeat (their namespace, phase and job's uid) are interned:
    # one copy each, not one per pod (as upstream's pod cache shares them with the job).
    return PodInfo(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        phase=sys.intern(phase),
        deleting=deleting,
        has_finalizer=any(f in kind.finalizers for f in as_list(meta.get("finalizers"))),
        ready=ready_cond is not None,
        ready_since=parse_time(ready_cond.get("lastTransitionTime")) if ready_cond else None,
        node_assigned=bool(spec.get("nodeName")),
        started=started,
        unstarted_version="" if started else str(meta.get("resourceVersion") or ""),
        restarts=sum(restarts) + sum(init_restarts),
        max_restarts=max(restarts, default=0),
        created=parse_time(meta.get("creationTimestamp")),
        finished_at=_finished_at(meta, status) if finished else None,
        namespace=sys.intern(str(meta.get("namespace", ""))),
        label_uid=sys.intern(str(as_dict(meta.get("labels")).get(kind.controller_uid_label, ""))),
        controller_uid=_intern(controller_uid(meta)),
        completion_index=get_completion_index(annotations, kind.completion_index_key),
        index_failure_count=get_index_failure_count(annotations, kind.index_failure_count_key),
        index_ignored_failure_count=get_index_ignored_failure_count(
            annotations, kind.index_ignored_failure_count_key
        ),
        failure=pod_failure_facts(body) if facts else None,
        deletion_cost=get_deletion_cost(annotations),
        attempt=attempt_of(as_dict(meta.get("labels"))),
    )


def get_deletion_cost(annotations: Mapping[str, Any]) -> int:
    """helper.GetDeletionCostFromPodAnnotations: the pod-deletion-cost annotation as an
    int32 in base 10; 0 when missing or invalid (a leading "+" or zero, as in "+1" or
    "007", is invalid, as are spaces and values out of the int32 range)."""
    value = annotations.get(c.POD_DELETION_COST)
    if not isinstance(value, str) or not value:
        return 0
    if not (value[0] == "-" or value == "0" or "1" <= value[0] <= "9"):
        return 0
    digits = value[1:] if value[0] == "-" else value
    # strconv.ParseInt: ASCII digits only (Python's int() takes "_" and Unicode digits).
    if not digits or not all("0" <= ch <= "9" for ch in digits):
        return 0
    cost = int(value)
    return cost if -(2**31) <= cost <= _MAX_INT32 else 0


def _intern(value: str | None) -> str | None:
    return None if value is None else sys.intern(value)


def controller_uid(meta: Mapping[str, Any]) -> str | None:
    """metav1.GetControllerOf: the uid of the ownerReference marked controller."""
    for ref in as_list(meta.get("ownerReferences")):
        ref = as_dict(ref)
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
        # Upstream omits an empty completedIndexes and an unset failedIndexes; None
        # clears a stale value (an Indexed job whose completions went down).
        "completedIndexes": status.completed_indexes or None,
        "failedIndexes": status.failed_indexes,
        "podFailureBackoff": {
            "failuresSinceLastSuccess": status.failures_since_success,
            "lastFailureTime": (
                format_time(status.last_failure_time) if status.last_failure_time else None
            ),
        },
        # Absent, as from a Job, until the job first restarts.
        "restarts": status.restarts or None,
        "selector": status.selector,
        "observedGeneration": status.observed_generation,
        "statusText": status.status_text,
        "completionsText": status.completions_text,
        "durationText": status.duration_text,
        "containersText": status.containers_text,
        "imagesText": status.images_text,
    }


#: The fields of batch/v1 JobStatus, of those status_to_dict writes.
_JOB_STATUS_FIELDS: Final = (
    "conditions",
    "startTime",
    "completionTime",
    "active",
    "ready",
    "terminating",
    "succeeded",
    "failed",
    "uncountedTerminatedPods",
    "completedIndexes",
    "failedIndexes",
)


def job_status_to_dict(status: JobStatus) -> JsonDict:
    """A batch/v1 Job's status as the body of a merge patch: status_to_dict without
    ParallelJob's additions, which a Job's API does not have. ``ready`` and
    ``terminating`` are always written, 0 rather than absent, as upstream writes them."""
    full = status_to_dict(status)
    return {key: full[key] for key in _JOB_STATUS_FIELDS}


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


def candidate_jobs(pod: PodInfo) -> set[str]:
    """The jobs that must look at this pod: the one its label names and the one that
    controls it (the pod index's keys)."""
    return {uid for uid in (pod.label_uid, pod.controller_uid) if uid}
