"""A ParallelJob as Kueue's ``GenericJob``: what Kueue v0.17.0's Job integration
(``pkg/controller/jobs/job/job_controller.go``) computes for a batch/v1 Job, for a
ParallelJob, whose API has the same fields.

- :func:`workload_name`: the Workload's name (``workload_names.go``), a pure function
  of the owner's kind, group, name and uid, so that a restarted operator finds it again;
- :func:`job_pod_sets`: the one PodSet ``main`` (``PodSets``, ``JobPodSets``);
- :func:`new_workload`: the Workload the operator creates (``ConstructWorkload``,
  ``NewWorkload``, ``prepareWorkload``), the priority resolved by the shell;
- :func:`pod_sets_info`: what an admission puts on the pods (``getPodSetsInfoFromStatus``,
  ``podset.FromAssignment``), :func:`start_change` applying it to the job
  (``RunWithPodSetsInfo``, ``podset.Merge``) and :func:`restore_change` taking it back
  from the Workload's copy of the template (``RestorePodSetsInfo``,
  ``podset.RestorePodSpec``);
- :func:`equivalent_to_workload`: whether a Workload still stands for the job
  (``EquivalentToWorkload``): a change of count (``parallelism``) makes it not, and the
  reconciler then evicts the job and replaces the Workload, as Kueue does for a Job.

A conflict while merging is a value (:class:`PodSetError`), as Kueue's
``podset.IsPermanent`` errors are: the Workload is then finished (``FailedToStart``),
there being no point in retrying.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from ... import constants as c
from ...json_types import JsonDict, as_dict, as_list
from ..job.model import JobSpec, JobStatus, atoi, parse_spec, parse_status
from .workload_model import (
    KUEUE_API_VERSION,
    KUEUE_GROUP,
    RESOURCE_IN_USE_FINALIZER,
    WORKLOAD_KIND,
    PodSet,
    PodSetAssignment,
    PriorityClassRef,
    ResourceFlavor,
    Workload,
    pod_set_to_dict,
)

# Labels and annotations on the job (pkg/controller/constants, jobs/job).
QUEUE_LABEL: Final = f"{KUEUE_GROUP}/queue-name"
MAX_EXEC_TIME_LABEL: Final = f"{KUEUE_GROUP}/max-exec-time-seconds"
PRIORITY_CLASS_LABEL: Final = f"{KUEUE_GROUP}/priority-class"
JOB_UID_LABEL: Final = f"{KUEUE_GROUP}/job-uid"
MIN_PARALLELISM_ANNOTATION: Final = f"{KUEUE_GROUP}/job-min-parallelism"
COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION: Final = f"{KUEUE_GROUP}/job-completions-equal-parallelism"
#: Set with suspend while a stop has not restored the template yet (Job.Stop).
STOPPING_ANNOTATION: Final = f"{KUEUE_GROUP}/stopping"
PROVREQ_ANNOTATION_PREFIX: Final = "provreq.kueue.x-k8s.io/"
# What an admission puts on the pods (pkg/constants, apis/kueue/v1beta2).
PODSET_LABEL: Final = f"{KUEUE_GROUP}/podset"
LOCAL_QUEUE_LABEL: Final = f"{KUEUE_GROUP}/local-queue-name"
CLUSTER_QUEUE_LABEL: Final = f"{KUEUE_GROUP}/cluster-queue-name"
WORKLOAD_ANNOTATION: Final = f"{KUEUE_GROUP}/workload"
TOPOLOGY_GATE: Final = f"{KUEUE_GROUP}/topology"
REQUIRED_TOPOLOGY: Final = f"{KUEUE_GROUP}/podset-required-topology"
PREFERRED_TOPOLOGY: Final = f"{KUEUE_GROUP}/podset-preferred-topology"
UNCONSTRAINED_TOPOLOGY: Final = f"{KUEUE_GROUP}/podset-unconstrained-topology"

#: kueue.DefaultPodSetName: a Job's one PodSet.
MAIN: Final = "main"
#: The labels a job controller puts on a template, never copied to the Workload
#: (cleanLabels) and kept by a restore: Kueue's for a Job (``managedLabels``) and the
#: ParallelJob's own. The ``job-name`` ones stay in the PodSet, as cleanLabels keeps
#: batch.kubernetes.io/job-name.
MANAGED_LABELS: Final = (
    "job-name",
    "controller-uid",
    f"{c.JOB_KEY_PREFIX}/job-name",
    f"{c.JOB_KEY_PREFIX}/controller-uid",
    c.LABEL_JOB_NAME,
    c.LABEL_CONTROLLER_UID,
)
_KEPT_IN_POD_SET: Final = {"job-name", f"{c.JOB_KEY_PREFIX}/job-name", c.LABEL_JOB_NAME}
#: The completion-index label on an Indexed ParallelJob's pods: Topology Aware
#: Scheduling's podIndexLabel (batch.kubernetes.io/job-completion-index for a Job).
POD_INDEX_LABEL: Final = f"{c.GROUP}/job-completion-index"

_WORKLOAD_NAME_MAX: Final = 253  # 63 with the ShortWorkloadNames gate (alpha, off)
_HASH_LENGTH: Final = 5


# ---------------------------------------------------------------------------- the job
@dataclass(frozen=True)
class QueuedJob:
    """What Kueue reads of a ParallelJob: its metadata, spec (upstream's defaults
    applied), raw template and status."""

    namespace: str
    name: str
    uid: str
    spec: JobSpec = field(default_factory=JobSpec)
    status: JobStatus = field(default_factory=JobStatus)
    template: JsonDict = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    deleting: bool = False

    @property
    def queue_name(self) -> str:
        return self.labels.get(QUEUE_LABEL, "")

    @property
    def is_suspended(self) -> bool:
        """Job.IsSuspended: suspended, and no stop half done."""
        return self.spec.suspend and self.annotations.get(STOPPING_ANNOTATION) != "true"

    @property
    def is_active(self) -> bool:
        return self.status.active != 0

    @property
    def pods_count(self) -> int:
        """Job.podsCount: parallelism, lowered to completions."""
        completions = self.spec.completions
        if completions is not None and completions < self.spec.parallelism:
            return completions
        return self.spec.parallelism

    @property
    def min_count(self) -> int | None:
        """Job.minPodsCount: the min-parallelism annotation (strconv.Atoi), which makes
        the job partially admissible."""
        raw = self.annotations.get(MIN_PARALLELISM_ANNOTATION)
        return None if raw is None else atoi(raw)

    @property
    def completions_follow_parallelism(self) -> bool:
        """Job.syncCompletionWithParallelism (strconv.ParseBool)."""
        raw = self.annotations.get(COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION)
        return raw in ("1", "t", "T", "true", "TRUE", "True")

    def finished(self) -> tuple[str, bool] | None:
        """Job.Finished: (message, success) of the first Complete or Failed condition
        that is True; None while the job runs."""
        for cond in self.status.conditions:
            if cond.type in (c.COND_COMPLETE, c.COND_FAILED) and cond.status == "True":
                return cond.message, cond.type != c.COND_FAILED
        return None

    def pods_ready(self) -> bool:
        """Job.PodsReady: ready, succeeded and uncounted succeeded pods reach podsCount."""
        status = self.status
        ready = status.ready + status.succeeded + len(status.uncounted_succeeded)
        return ready >= self.pods_count


def parse_queued_job(body: Mapping[str, Any]) -> QueuedJob:
    meta = as_dict(body.get("metadata"))
    spec = as_dict(body.get("spec"))
    return QueuedJob(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        spec=parse_spec(spec),
        status=parse_status(as_dict(body.get("status"))),
        template=copy.deepcopy(dict(as_dict(spec.get("template")))),
        labels={str(k): str(v) for k, v in as_dict(meta.get("labels")).items()},
        annotations={str(k): str(v) for k, v in as_dict(meta.get("annotations")).items()},
        deleting=meta.get("deletionTimestamp") is not None,
    )


def reclaimable_pods(job: QueuedJob) -> tuple[tuple[str, int], ...]:
    """Job.ReclaimablePods: once pods have succeeded, the slots of ``parallelism``
    that the remaining completions no longer need, so the quota frees as the job
    drains. (name, count) pairs; none for a job of one pod at a time."""
    parallelism = job.spec.parallelism
    succeeded = job.status.succeeded
    if parallelism == 1 or succeeded == 0:
        return ()
    completions = job.spec.completions if job.spec.completions is not None else parallelism
    remaining = completions - succeeded
    if remaining >= parallelism:
        return ()
    return ((MAIN, parallelism - remaining),)


# --------------------------------------------------------------------------- the name
def workload_name(owner_name: str, owner_uid: str, kind: str = c.KIND, group: str = c.GROUP) -> str:
    """GetWorkloadNameForOwnerWithGVK: ``<kind>-<name>`` cut to 247 characters, a dash
    and 5 hex digits of the SHA-1 of kind, group (not the version), name and uid."""
    prefix = f"{kind.lower()}-{owner_name}"[: _WORKLOAD_NAME_MAX - 1 - _HASH_LENGTH]
    digest = hashlib.sha1(f"{kind}\n{group}\n{owner_name}\n{owner_uid}".encode()).hexdigest()
    return f"{prefix}-{digest[:_HASH_LENGTH]}"


# ------------------------------------------------------------------------ the PodSets
def job_pod_sets(job: QueuedJob) -> tuple[PodSet, ...]:
    """JobPodSets(Job.PodSets): one PodSet ``main``, the template less the labels a
    job controller manages, env variables deduplicated; with Topology Aware
    Scheduling (beta, on at v0.17.0) a topology request."""
    template = _sanitized(_clean_labels(job.template))
    return (
        PodSet(
            name=MAIN,
            count=job.pods_count,
            template=template,
            min_count=job.min_count,
            topology_request=_topology_request(job.template),
        ),
    )


def _clean_labels(template: Mapping[str, Any]) -> JsonDict:
    """cleanLabels, on a copy."""
    out = copy.deepcopy(dict(template))
    labels = as_dict(as_dict(out.get("metadata")).get("labels"))
    for key in MANAGED_LABELS:
        if key not in _KEPT_IN_POD_SET and key in labels:
            del out["metadata"]["labels"][key]
    return out


def _sanitized(template: JsonDict) -> JsonDict:
    """SanitizePodSet: in each container and init container, one env variable per
    name, where the first stood, with the last's value."""
    spec = as_dict(template.get("spec"))
    for kind in ("containers", "initContainers"):
        for container in as_list(spec.get(kind)):
            if isinstance(container, dict) and isinstance(container.get("env"), list):
                last: dict[str, Any] = {}
                for var in container["env"]:
                    last[str(as_dict(var).get("name"))] = var
                container["env"] = list(last.values())
    return template


def _topology_request(template: Mapping[str, Any]) -> JsonDict | None:
    """NewPodSetTopologyRequest(...).PodIndexLabel(...).Build(), for the trivial
    requests: required, preferred or unconstrained topology by annotation, and the
    index label (the slice and group annotations are not carried over)."""
    annotations = as_dict(as_dict(template.get("metadata")).get("annotations"))
    request: JsonDict = {}
    if REQUIRED_TOPOLOGY in annotations:
        request["required"] = annotations[REQUIRED_TOPOLOGY]
    elif PREFERRED_TOPOLOGY in annotations:
        request["preferred"] = annotations[PREFERRED_TOPOLOGY]
    elif UNCONSTRAINED_TOPOLOGY in annotations:
        request["unconstrained"] = str(annotations[UNCONSTRAINED_TOPOLOGY]).lower() in (
            "1",
            "t",
            "true",
        )
    request["podIndexLabel"] = POD_INDEX_LABEL
    return request


# ------------------------------------------------------------------------ the Workload
@dataclass(frozen=True)
class Priority:
    """The job's priority as ExtractPriority resolves it (the shell reads the
    classes): the class named by the job's kueue.x-k8s.io/priority-class label, or the
    template's priorityClassName, or the global default; none: 0 and no reference."""

    value: int = 0
    class_ref: PriorityClassRef | None = None


def maximum_execution_time_seconds(labels: Mapping[str, str]) -> int | None:
    """MaximumExecutionTimeSecondsForObject: the label as a positive int32."""
    raw = labels.get(MAX_EXEC_TIME_LABEL)
    value = None if raw is None else atoi(raw)
    return value if value is not None and 0 < value < 2**31 else None


def workload_spec(job: QueuedJob, priority: Priority, active: bool | None = None) -> JsonDict:
    """The Workload's spec for the job (NewWorkload + prepareWorkload); the optional
    fields absent are None, so that the dict is also a merge patch that clears them
    (updateWorkloadToMatchJob replaces the spec)."""
    ref = priority.class_ref
    return {
        "queueName": job.queue_name,
        "podSets": [pod_set_to_dict(ps) for ps in job_pod_sets(job)],
        "maximumExecutionTimeSeconds": maximum_execution_time_seconds(job.labels),
        "priorityClassRef": (
            None if ref is None else {"group": ref.group, "kind": ref.kind, "name": ref.name}
        ),
        "priority": priority.value,
        "active": active,
    }


def new_workload(job: QueuedJob, priority: Priority) -> JsonDict:
    """The Workload the operator creates for the job (ConstructWorkload): the job's uid
    as a label, the resource-in-use finalizer, a controller reference, the job's
    provisioning-request annotations, the spec of :func:`workload_spec`."""
    meta: JsonDict = {
        "name": workload_name(job.name, job.uid),
        "namespace": job.namespace,
        "finalizers": [RESOURCE_IN_USE_FINALIZER],
        "ownerReferences": [
            {
                "apiVersion": c.API_VERSION,
                "kind": c.KIND,
                "name": job.name,
                "uid": job.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if _is_label_value(job.uid):
        meta["labels"] = {JOB_UID_LABEL: job.uid}
    annotations = {
        k: v for k, v in job.annotations.items() if k.startswith(PROVREQ_ANNOTATION_PREFIX)
    }
    if annotations:
        meta["annotations"] = annotations
    spec = {k: v for k, v in workload_spec(job, priority).items() if v is not None}
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": WORKLOAD_KIND,
        "metadata": meta,
        "spec": spec,
    }


_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _is_label_value(value: str) -> bool:
    return len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


# ---------------------------------------------------------------------- pod-set infos
@dataclass(frozen=True)
class PodSetInfo:
    """podset.PodSetInfo: what a Workload puts on (or takes back from) a template."""

    name: str
    count: int
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[JsonDict, ...] = ()
    scheduling_gates: tuple[JsonDict, ...] = ()


@dataclass(frozen=True)
class PodSetError:
    """An infos error with Kueue's message. Permanent ones (podset.IsPermanent: a
    conflict, a wrong number of infos) finish the Workload; a missing flavor is
    retried."""

    message: str
    permanent: bool = True


def pod_sets_info(
    wl: Workload, flavors: Mapping[str, ResourceFlavor]
) -> tuple[PodSetInfo, ...] | PodSetError:
    """getPodSetsInfoFromStatus: per assignment of the admission, the admitted count,
    the flavors' node labels and tolerations, the podset label, the queue labels
    (AssignQueueLabelsForPods, beta, on), the workload annotation (TAS, beta, on), then
    the admission checks' podSetUpdates."""
    if wl.admission is None:
        return ()
    infos: list[PodSetInfo] = []
    for i, assignment in enumerate(wl.admission.pod_set_assignments):
        pod_set = wl.pod_sets[i] if i < len(wl.pod_sets) else PodSet(assignment.name, 0)
        info = _from_assignment(assignment, pod_set, flavors)
        if isinstance(info, PodSetError):
            return info
        labels = {**info.labels, PODSET_LABEL: assignment.name, LOCAL_QUEUE_LABEL: wl.queue_name}
        cluster_queue = wl.admission.cluster_queue
        if len(cluster_queue) <= 63 and _DNS1123_LABEL.fullmatch(cluster_queue):
            labels[CLUSTER_QUEUE_LABEL] = cluster_queue
        annotations = {**info.annotations, WORKLOAD_ANNOTATION: wl.name}
        merged = replace(info, labels=labels, annotations=annotations)
        for check in wl.admission_checks:
            update = next((u for u in check.pod_set_updates if u.name == info.name), None)
            if update is not None:
                result = merge_info(
                    merged,
                    PodSetInfo(
                        name=update.name,
                        count=0,
                        labels=update.labels,
                        annotations=update.annotations,
                        node_selector=update.node_selector,
                        tolerations=update.tolerations,
                    ),
                )
                if isinstance(result, PodSetError):
                    return PodSetError(f'in admission check "{check.name}": {result.message}')
                merged = result
        infos.append(merged)
    return tuple(infos)


def _from_assignment(
    assignment: PodSetAssignment, pod_set: PodSet, flavors: Mapping[str, ResourceFlavor]
) -> PodSetInfo | PodSetError:
    """podset.FromAssignment: the admitted count (the PodSet's when unset); each
    distinct flavor's node labels (later ones win) and tolerations (appended), in the
    order of the resources; with a topology assignment, the topology gate."""
    node_selector: dict[str, str] = {}
    tolerations: list[JsonDict] = []
    seen: set[str] = set()
    for flavor_name in assignment.flavors.values():
        if flavor_name in seen:
            continue
        flavor = flavors.get(flavor_name)
        if flavor is None:
            message = f'resourceflavors.{KUEUE_GROUP} "{flavor_name}" not found'
            return PodSetError(message, permanent=False)
        node_selector.update(flavor.node_labels)
        tolerations.extend(flavor.tolerations)
        seen.add(flavor_name)
    annotations: dict[str, str] = {}
    gates: tuple[JsonDict, ...] = ()
    if assignment.topology_assigned:
        request = pod_set.topology_request or {}
        if not any(k in request for k in ("required", "preferred", "unconstrained")):
            annotations[UNCONSTRAINED_TOPOLOGY] = "true"
        gates = ({"name": TOPOLOGY_GATE},)
    return PodSetInfo(
        name=assignment.name,
        count=pod_set.count if assignment.count is None else assignment.count,
        annotations=annotations,
        node_selector=node_selector,
        tolerations=tuple(tolerations),
        scheduling_gates=gates,
    )


def _conflict(field_name: str, ours: Mapping[str, str], theirs: Mapping[str, str]) -> str | None:
    """utilmaps.HaveConflict, wrapped as BadPodSetsUpdateError."""
    for key, value in ours.items():
        if key in theirs and theirs[key] != value:
            return (
                f"invalid admission check PodSetUpdate: conflict for {field_name}: "
                f"conflict for key={key}, value1={value}, value2={theirs[key]}"
            )
    return None


def merge_info(info: PodSetInfo, other: PodSetInfo) -> PodSetInfo | PodSetError:
    """PodSetInfo.Merge: ``other``'s annotations, labels and node selector added (the
    same key with another value is a permanent error), its tolerations and scheduling
    gates appended unless already there."""
    for name, ours, theirs in (
        ("annotations", info.annotations, other.annotations),
        ("labels", info.labels, other.labels),
        ("nodeSelector", info.node_selector, other.node_selector),
    ):
        problem = _conflict(name, ours, theirs)
        if problem:
            return PodSetError(problem)
    return replace(
        info,
        annotations={**info.annotations, **other.annotations},
        labels={**info.labels, **other.labels},
        node_selector={**info.node_selector, **other.node_selector},
        tolerations=_union(info.tolerations, other.tolerations),
        scheduling_gates=_union(info.scheduling_gates, other.scheduling_gates),
    )


def _union(ours: tuple[JsonDict, ...], theirs: Iterable[JsonDict]) -> tuple[JsonDict, ...]:
    out = list(ours)
    for item in theirs:
        if item not in out:
            out.append(item)
    return tuple(out)


def info_of_template(name: str, count: int, template: Mapping[str, Any]) -> PodSetInfo:
    """The template's fields a PodSetInfo covers (podset.FromPodSet on a template)."""
    meta = as_dict(template.get("metadata"))
    spec = as_dict(template.get("spec"))
    return PodSetInfo(
        name=name,
        count=count,
        labels=dict(as_dict(meta.get("labels"))),
        annotations=dict(as_dict(meta.get("annotations"))),
        node_selector=dict(as_dict(spec.get("nodeSelector"))),
        tolerations=tuple(dict(as_dict(t)) for t in as_list(spec.get("tolerations"))),
        scheduling_gates=tuple(dict(as_dict(g)) for g in as_list(spec.get("schedulingGates"))),
    )


def with_info(template: Mapping[str, Any], info: PodSetInfo) -> JsonDict:
    """A copy of the template whose labels, annotations, node selector, tolerations
    and scheduling gates are ``info``'s (an empty one absent, as Go omits it)."""
    out = copy.deepcopy(dict(template))
    meta = out.setdefault("metadata", {})
    spec = out.setdefault("spec", {})
    for parent, key, value in (
        (meta, "labels", dict(info.labels)),
        (meta, "annotations", dict(info.annotations)),
        (spec, "nodeSelector", dict(info.node_selector)),
        (spec, "tolerations", [dict(t) for t in info.tolerations]),
        (spec, "schedulingGates", [dict(g) for g in info.scheduling_gates]),
    ):
        if value:
            parent[key] = value
        else:
            parent.pop(key, None)
    if not meta:
        del out["metadata"]
    return out


def merge_template(template: Mapping[str, Any], info: PodSetInfo) -> JsonDict | PodSetError:
    """podset.Merge: ``info`` added to the template, or the conflict."""
    merged = merge_info(info_of_template(info.name, info.count, template), info)
    if isinstance(merged, PodSetError):
        return merged
    return with_info(template, merged)


def restore_template(template: Mapping[str, Any], pod_set: PodSet) -> JsonDict:
    """RestorePodSetsInfo's podset.RestorePodSpec: the labels, annotations, node
    selector, tolerations and scheduling gates replaced by the Workload's copy (what
    they were before the admission added to them), keeping the job controller's
    labels."""
    info = info_of_template(pod_set.name, pod_set.count, pod_set.template)
    labels = dict(info.labels)
    current = as_dict(as_dict(template.get("metadata")).get("labels"))
    labels.update({k: current[k] for k in MANAGED_LABELS if k in current})
    return with_info(template, replace(info, labels=labels))


# ----------------------------------------------------------------- changes to the job
@dataclass(frozen=True)
class JobChange:
    """What a start or a restore writes on the job: None leaves a field alone."""

    suspend: bool | None = None
    parallelism: int | None = None
    completions: int | None = None
    template: JsonDict | None = None


def start_change(job: QueuedJob, infos: Sequence[PodSetInfo]) -> JobChange | PodSetError:
    """RunWithPodSetsInfo: unsuspended; a partially admissible job runs the admitted
    count (and as many completions, with the annotation asking for it); the infos
    merged into the template."""
    if len(infos) != 1:
        # BadPodSetsInfoLenError(1, n) prints its arguments swapped, so Kueue says
        # "expecting <n> podset, got 1".
        return PodSetError(f"invalid podset infos: expecting {len(infos)} podset, got 1")
    info = infos[0]
    parallelism = completions = None
    if job.min_count is not None:
        parallelism = info.count
        if job.completions_follow_parallelism:
            completions = parallelism
    template = merge_template(job.template, info)
    if isinstance(template, PodSetError):
        return template
    return JobChange(False, parallelism, completions, template)


def restore_change(job: QueuedJob, wl: Workload | None) -> JobChange:
    """RestorePodSetsInfo from the Workload's PodSet (nothing without a Workload): the
    count back into a partially admissible job's parallelism; the template back."""
    if wl is None or not wl.pod_sets:
        return JobChange()
    pod_set = wl.pod_sets[0]
    parallelism = completions = None
    if job.min_count is not None and job.spec.parallelism != pod_set.count:
        parallelism = pod_set.count
        if job.completions_follow_parallelism:
            completions = parallelism
    template = restore_template(job.template, pod_set)
    return JobChange(None, parallelism, completions, None if template == job.template else template)


# ----------------------------------------------------------------------- equivalence
def equivalent_to_workload(
    job: QueuedJob, wl: Workload, flavors: Mapping[str, ResourceFlavor]
) -> bool:
    """EquivalentToWorkload: the Workload is the job's (its controller has the job's
    name), with the same execution time limit, and PodSets of the same count, minCount
    and containers (and tolerations, unless admitted). Against what runs when the
    Workload holds quota; a suspended job may also match the Workload's own PodSets."""
    owner = wl.controller
    if owner is None or owner.name != job.name:
        return False
    limit = maximum_execution_time_seconds(job.labels)
    if _or_minus_one(wl.maximum_execution_time_seconds) != _or_minus_one(limit):
        return False
    ours = job_pod_sets(job)
    admitted = wl.is_admitted
    running = expected_running_pod_sets(wl, flavors)
    if running is not None:
        if same_pod_sets(ours, running, ignore_tolerations=admitted):
            return True
        return job.is_suspended and same_pod_sets(ours, wl.pod_sets, ignore_tolerations=admitted)
    return same_pod_sets(ours, wl.pod_sets, ignore_tolerations=admitted)


def expected_running_pod_sets(
    wl: Workload, flavors: Mapping[str, ResourceFlavor]
) -> tuple[PodSet, ...] | None:
    """expectedRunningPodSets: the Workload's PodSets as the admission runs them (the
    infos merged; the admitted count where partial admission applies); None without a
    reservation or when the infos cannot be had."""
    if not wl.has_quota_reservation:
        return None
    infos = pod_sets_info(wl, flavors)
    if isinstance(infos, PodSetError):
        return None
    by_name = {info.name: info for info in infos}
    running = []
    for ps in wl.pod_sets:
        info = by_name.get(ps.name)
        if info is None:
            return None
        template = merge_template(ps.template, info)
        if isinstance(template, PodSetError):
            return None
        count = (
            info.count if wl.can_be_partially_admitted and ps.min_count is not None else ps.count
        )
        running.append(replace(ps, template=template, count=count))
    return tuple(running)


def same_pod_sets(a: Sequence[PodSet], b: Sequence[PodSet], *, ignore_tolerations: bool) -> bool:
    """equality.ComparePodSetSlices: count, minCount, init containers, containers and
    (unless ignored) tolerations, compared as Go's equality.Semantic does (see
    :func:`semantic`)."""
    if len(a) != len(b):
        return False
    keys = ("initContainers", "containers") + (() if ignore_tolerations else ("tolerations",))
    for x, y in zip(a, b, strict=True):
        if x.count != y.count or _or_minus_one(x.min_count) != _or_minus_one(y.min_count):
            return False
        xs, ys = as_dict(x.template.get("spec")), as_dict(y.template.get("spec"))
        if any(semantic(xs.get(k)) != semantic(ys.get(k)) for k in keys):
            return False
    return True


_QUANTITY = re.compile(r"([+-]?[0-9.]+)([eE][+-]?[0-9]+|[kMGTPE]i?|[mun]|)")
_SUFFIX: Final[dict[str, Decimal]] = {
    "": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    **{s: Decimal(1000) ** (i + 1) for i, s in enumerate("kMGTPE")},
    **{s + "i": Decimal(1024) ** (i + 1) for i, s in enumerate("KMGTPE")},
}  # fmt: skip


def _quantity(value: object) -> object:
    """resource.Quantity's value (Semantic compares quantities by Cmp): "1", 1 and
    "1000m" alike. Anything unparsable stays as it is."""
    text = str(value)
    match = _QUANTITY.fullmatch(text)
    if match is None:
        return value
    number, suffix = match.groups()
    try:
        if suffix[:1] in ("e", "E"):
            return Decimal(number + suffix)
        return Decimal(number) * _SUFFIX[suffix]
    except (InvalidOperation, KeyError):
        return value


def semantic(value: object, key: str = "") -> object:
    """A JSON value normalized as Go sees it after a round trip through the API types
    and equality.Semantic: zero values ("", 0, false, null, [] and {}) absent, as
    omitempty drops them and Semantic takes nil and empty alike; resource quantities
    by value; a port's protocol TCP when unset, as the Workload's CRD defaults it where
    the ParallelJob's (which keeps its template as written) does not."""
    if isinstance(value, Mapping):
        out = {k: semantic(v, k) for k, v in value.items()}
        if key in ("requests", "limits"):
            out = {k: _quantity(v) for k, v in value.items()}
        if "containerPort" in out:
            out.setdefault("protocol", "TCP")
        return {k: v for k, v in out.items() if v not in (None, "", 0, False, [], {})}
    if isinstance(value, list):
        return [semantic(v) for v in value]
    return value


# --------------------------------------------------------------------------- helpers
def _or_minus_one(value: int | None) -> int:
    """ptr.Deref(value, -1)."""
    return -1 if value is None else value
