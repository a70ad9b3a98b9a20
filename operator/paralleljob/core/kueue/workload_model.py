"""A Kueue v1beta2 Workload and a ResourceFlavor as plain immutable values, parsed from
the JSON the API server returns (``apis/kueue/v1beta2/workload_types.go`` and
``resourceflavor_types.go``, Kueue v0.17.0).

Only what the operator reads or writes is kept: the owner references and finalizers,
``spec.queueName``, ``spec.podSets`` (a template each, as JSON), the priority, the
execution time limit, and the status: conditions, ``admission`` (the ClusterQueue and,
per PodSet, the flavor of each resource and the admitted count), ``reclaimablePods``
and the admission checks' ``podSetUpdates``. Conditions are ``metav1.Condition``: unlike
a Job's (:class:`~paralleljob.core.job.model.Condition`) they carry
``observedGeneration``, which Kueue sets on every condition it writes, so they have a
type of their own. :func:`set_condition` is ``apimeta.SetStatusCondition``, the one way
Kueue changes a condition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final

from ...json_types import JsonDict, as_dict, as_list
from ...timeutil import format_time, parse_time, truncate

KUEUE_GROUP: Final = "kueue.x-k8s.io"
KUEUE_VERSION: Final = "v1beta2"
KUEUE_API_VERSION: Final = f"{KUEUE_GROUP}/{KUEUE_VERSION}"
WORKLOAD_KIND: Final = "Workload"
WORKLOAD_PLURAL: Final = "workloads"
RESOURCE_FLAVOR_PLURAL: Final = "resourceflavors"
WORKLOAD_PRIORITY_CLASS_PLURAL: Final = "workloadpriorityclasses"

#: kueue.ResourceInUseFinalizerName: holds a Workload (and its quota) until its owner
#: lets it go.
RESOURCE_IN_USE_FINALIZER: Final = f"{KUEUE_GROUP}/resource-in-use"

# Workload condition types (workload_types.go).
QUOTA_RESERVED: Final = "QuotaReserved"
ADMITTED: Final = "Admitted"
EVICTED: Final = "Evicted"
PREEMPTED: Final = "Preempted"
REQUEUED: Final = "Requeued"
PODS_READY: Final = "PodsReady"
FINISHED: Final = "Finished"

# Admission check states (admissioncheck_types.go CheckState).
CHECK_PENDING: Final = "Pending"
CHECK_READY: Final = "Ready"

#: api.maxConditionMsgSize (pkg/util/api/api.go): 32 KiB, in bytes.
MAX_CONDITION_MESSAGE: Final = 32 * 1024


@dataclass(frozen=True)
class WorkloadCondition:
    """A metav1.Condition of a Workload."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: datetime | None = None
    observed_generation: int = 0


@dataclass(frozen=True)
class PodSet:
    """spec.podSets[]: the pods of one kind a Workload stands for."""

    name: str
    count: int
    template: JsonDict = field(default_factory=dict)
    min_count: int | None = None
    topology_request: JsonDict | None = None


@dataclass(frozen=True)
class PodSetAssignment:
    """status.admission.podSetAssignments[]: the flavor of each resource, and the count
    admitted (None: the PodSet's count; partial admission sets fewer)."""

    name: str
    flavors: Mapping[str, str] = field(default_factory=dict)
    count: int | None = None
    #: Whether Topology Aware Scheduling assigned the pods to domains (topologyAssignment).
    topology_assigned: bool = False


@dataclass(frozen=True)
class Admission:
    cluster_queue: str
    pod_set_assignments: tuple[PodSetAssignment, ...] = ()


@dataclass(frozen=True)
class ReclaimablePod:
    """status.reclaimablePods[]: pods of a PodSet that will never run again, whose
    quota the Workload gives back."""

    name: str
    count: int


@dataclass(frozen=True)
class PodSetUpdate:
    """What an admission check asks to add to a PodSet's pods."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[JsonDict, ...] = ()


@dataclass(frozen=True)
class AdmissionCheckState:
    name: str
    state: str = CHECK_PENDING
    message: str = ""
    pod_set_updates: tuple[PodSetUpdate, ...] = ()


@dataclass(frozen=True)
class PriorityClassRef:
    """spec.priorityClassRef: a WorkloadPriorityClass (group kueue.x-k8s.io) or a
    PriorityClass (group scheduling.k8s.io)."""

    group: str
    kind: str
    name: str


WORKLOAD_PRIORITY_CLASS: Final = PriorityClassRef(KUEUE_GROUP, "WorkloadPriorityClass", "")
POD_PRIORITY_CLASS: Final = PriorityClassRef("scheduling.k8s.io", "PriorityClass", "")


@dataclass(frozen=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = False


@dataclass(frozen=True)
class Workload:
    namespace: str
    name: str
    uid: str = ""
    generation: int = 1
    resource_version: str = ""
    deleting: bool = False
    finalizers: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    owners: tuple[OwnerRef, ...] = ()
    queue_name: str = ""
    pod_sets: tuple[PodSet, ...] = ()
    priority_class_ref: PriorityClassRef | None = None
    priority: int | None = None
    #: spec.active (unset: true); Kueue sets it false to deactivate the Workload.
    active: bool | None = None
    maximum_execution_time_seconds: int | None = None
    conditions: tuple[WorkloadCondition, ...] = ()
    admission: Admission | None = None
    reclaimable_pods: tuple[ReclaimablePod, ...] = ()
    admission_checks: tuple[AdmissionCheckState, ...] = ()
    accumulated_past_execution_time_seconds: int | None = None

    @property
    def key(self) -> str:
        """workload.Key: ``namespace/name``, as Kueue's events print it."""
        return f"{self.namespace}/{self.name}"

    @property
    def controller(self) -> OwnerRef | None:
        """metav1.GetControllerOf."""
        return next((ref for ref in self.owners if ref.controller), None)

    @property
    def is_finished(self) -> bool:
        return is_true(self.conditions, FINISHED)

    @property
    def is_admitted(self) -> bool:
        return is_true(self.conditions, ADMITTED)

    @property
    def has_quota_reservation(self) -> bool:
        return is_true(self.conditions, QUOTA_RESERVED)

    @property
    def can_be_partially_admitted(self) -> bool:
        """workload.CanBePartiallyAdmitted: a PodSet whose minCount is below its count."""
        return any(
            ps.count > (ps.count if ps.min_count is None else ps.min_count) for ps in self.pod_sets
        )


@dataclass(frozen=True)
class ResourceFlavor:
    """What a flavor puts on the pods admitted to it: ``spec.nodeLabels`` as a node
    selector and ``spec.tolerations``. (``spec.nodeTaints`` only filters flavors in the
    scheduler: never injected.)"""

    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[JsonDict, ...] = ()


# --------------------------------------------------------------------- conditions
def kueue_path(plural: str, namespace: str = "", name: str = "", subresource: str = "") -> str:
    """The API path of Kueue's ``plural`` (cluster-scoped, or of all namespaces, when
    ``namespace`` is ""), of one object, or of its ``subresource``."""
    root = f"/apis/{KUEUE_API_VERSION}"
    path = f"{root}/namespaces/{namespace}/{plural}" if namespace else f"{root}/{plural}"
    path += f"/{name}" if name else ""
    return path + (f"/{subresource}" if subresource else "")


def find_condition(conditions: Iterable[WorkloadCondition], ctype: str) -> WorkloadCondition | None:
    return next((cond for cond in conditions if cond.type == ctype), None)


def is_true(conditions: Iterable[WorkloadCondition], ctype: str) -> bool:
    """apimeta.IsStatusConditionTrue."""
    cond = find_condition(conditions, ctype)
    return cond is not None and cond.status == "True"


def truncate_condition_message(message: str) -> str:
    """api.TruncateConditionMessage: at most 32 KiB (of UTF-8, as Go's len counts),
    the cut marked with " ..."."""
    data = message.encode()
    if len(data) <= MAX_CONDITION_MESSAGE:
        return message
    suffix = " ..."
    return data[: MAX_CONDITION_MESSAGE - len(suffix)].decode(errors="ignore") + suffix


def set_condition(
    conditions: Sequence[WorkloadCondition], new: WorkloadCondition, now: datetime
) -> tuple[tuple[WorkloadCondition, ...], bool]:
    """apimeta.SetStatusCondition: the conditions with ``new`` set, and whether any
    changed. A new type is appended; an existing one takes the new status (and the new
    lastTransitionTime, ``now`` when ``new`` has none) only if its status changes, and
    the new reason, message and observedGeneration always."""
    stamp = truncate(new.last_transition_time or now)
    old = find_condition(conditions, new.type)
    if old is None:
        return (*conditions, replace(new, last_transition_time=stamp)), True
    updated = replace(
        old,
        reason=new.reason,
        message=new.message,
        observed_generation=new.observed_generation,
    )
    if old.status != new.status:
        updated = replace(updated, status=new.status, last_transition_time=stamp)
    if updated == old:
        return tuple(conditions), False
    return tuple(updated if cond is old else cond for cond in conditions), True


def condition_to_dict(cond: WorkloadCondition) -> JsonDict:
    """A metav1.Condition's JSON (reason and lastTransitionTime are required there)."""
    out: JsonDict = {
        "type": cond.type,
        "status": cond.status,
        "reason": cond.reason,
        "message": cond.message,
        "lastTransitionTime": (
            format_time(cond.last_transition_time) if cond.last_transition_time else None
        ),
    }
    if cond.observed_generation:
        out["observedGeneration"] = cond.observed_generation
    return out


def reclaimable_pods_to_list(pods: Iterable[ReclaimablePod]) -> list[JsonDict] | None:
    """status.reclaimablePods as JSON; None (a merge patch's "clear") when empty."""
    out = [{"name": pod.name, "count": pod.count} for pod in pods]
    return out or None


def pod_set_to_dict(ps: PodSet) -> JsonDict:
    out: JsonDict = {"name": ps.name, "count": ps.count, "template": ps.template}
    if ps.min_count is not None:
        out["minCount"] = ps.min_count
    if ps.topology_request is not None:
        out["topologyRequest"] = ps.topology_request
    return out


# ------------------------------------------------------------------------- parsing


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_map(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in as_dict(value).items()}


def _tolerations(value: object) -> tuple[JsonDict, ...]:
    return tuple(dict(as_dict(t)) for t in as_list(value))


def parse_condition(raw: Mapping[str, Any]) -> WorkloadCondition:
    return WorkloadCondition(
        type=str(raw.get("type", "")),
        status=str(raw.get("status", "")),
        reason=str(raw.get("reason", "") or ""),
        message=str(raw.get("message", "") or ""),
        last_transition_time=parse_time(raw.get("lastTransitionTime")),
        observed_generation=_int(raw.get("observedGeneration")) or 0,
    )


def parse_pod_set(raw: Mapping[str, Any]) -> PodSet:
    topology = raw.get("topologyRequest")
    return PodSet(
        name=str(raw.get("name", "main")),
        count=_int(raw.get("count")) or 0,
        template=dict(as_dict(raw.get("template"))),
        min_count=_int(raw.get("minCount")),
        topology_request=dict(topology) if isinstance(topology, Mapping) else None,
    )


def _parse_admission(raw: object) -> Admission | None:
    if not isinstance(raw, Mapping):
        return None
    return Admission(
        cluster_queue=str(raw.get("clusterQueue", "")),
        pod_set_assignments=tuple(
            PodSetAssignment(
                name=str(a.get("name", "")),
                flavors=_str_map(a.get("flavors")),
                count=_int(a.get("count")),
                topology_assigned=a.get("topologyAssignment") is not None,
            )
            for a in map(as_dict, as_list(raw.get("podSetAssignments")))
        ),
    )


def _parse_check(raw: Mapping[str, Any]) -> AdmissionCheckState:
    return AdmissionCheckState(
        name=str(raw.get("name", "")),
        state=str(raw.get("state", CHECK_PENDING)),
        message=str(raw.get("message", "") or ""),
        pod_set_updates=tuple(
            PodSetUpdate(
                name=str(u.get("name", "")),
                labels=_str_map(u.get("labels")),
                annotations=_str_map(u.get("annotations")),
                node_selector=_str_map(u.get("nodeSelector")),
                tolerations=_tolerations(u.get("tolerations")),
            )
            for u in map(as_dict, as_list(raw.get("podSetUpdates")))
        ),
    )


def _parse_owner(raw: Mapping[str, Any]) -> OwnerRef:
    return OwnerRef(
        api_version=str(raw.get("apiVersion", "")),
        kind=str(raw.get("kind", "")),
        name=str(raw.get("name", "")),
        uid=str(raw.get("uid", "")),
        controller=raw.get("controller") is True,
    )


def _parse_priority_class_ref(raw: object) -> PriorityClassRef | None:
    if not isinstance(raw, Mapping):
        return None
    return PriorityClassRef(
        str(raw.get("group", "")), str(raw.get("kind", "")), str(raw.get("name", ""))
    )


def parse_workload(body: Mapping[str, Any]) -> Workload:
    """A Workload from its JSON (v1beta2)."""
    meta = as_dict(body.get("metadata"))
    spec = as_dict(body.get("spec"))
    status = as_dict(body.get("status"))
    active = spec.get("active")
    return Workload(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        generation=_int(meta.get("generation")) or 1,
        resource_version=str(meta.get("resourceVersion", "") or ""),
        deleting=meta.get("deletionTimestamp") is not None,
        finalizers=tuple(str(f) for f in as_list(meta.get("finalizers"))),
        labels=_str_map(meta.get("labels")),
        owners=tuple(_parse_owner(as_dict(r)) for r in as_list(meta.get("ownerReferences"))),
        queue_name=str(spec.get("queueName", "") or ""),
        pod_sets=tuple(parse_pod_set(as_dict(p)) for p in as_list(spec.get("podSets"))),
        priority_class_ref=_parse_priority_class_ref(spec.get("priorityClassRef")),
        priority=_int(spec.get("priority")),
        active=active if isinstance(active, bool) else None,
        maximum_execution_time_seconds=_int(spec.get("maximumExecutionTimeSeconds")),
        conditions=tuple(parse_condition(as_dict(c)) for c in as_list(status.get("conditions"))),
        admission=_parse_admission(status.get("admission")),
        reclaimable_pods=tuple(
            ReclaimablePod(str(r.get("name", "")), _int(r.get("count")) or 0)
            for r in map(as_dict, as_list(status.get("reclaimablePods")))
        ),
        admission_checks=tuple(
            _parse_check(as_dict(c)) for c in as_list(status.get("admissionChecks"))
        ),
        accumulated_past_execution_time_seconds=_int(
            status.get("accumulatedPastExecutionTimeSeconds")
        ),
    )


def parse_resource_flavor(body: Mapping[str, Any]) -> ResourceFlavor:
    spec = as_dict(body.get("spec"))
    return ResourceFlavor(
        name=str(as_dict(body.get("metadata")).get("name", "")),
        node_labels=_str_map(spec.get("nodeLabels")),
        tolerations=_tolerations(spec.get("tolerations")),
    )
