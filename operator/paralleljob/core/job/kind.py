"""The seam for a second kind of job: everything the operator does differently for one
kind of job object lives in a :class:`JobKind`, which the shell and the pod builder
take. The core's decisions (sync.py and the policies) are the same for every kind.

A kind names its API (group, version, plural, status subresource), the keys of the
labels and annotations it puts on its pods, its tracking finalizers, the owner
reference its pods carry, the spec defaults the operator writes, which values of
spec.managedBy it reconciles, which status fields its API stores, whether its printed
DURATION needs the operator to write ``status.durationText``, whether the operator
deletes its finished jobs at ``ttlSecondsAfterFinished``, and whether scale-down honours
the pods' ``controller.kubernetes.io/pod-deletion-cost``. Two kinds: :data:`PARALLELJOB`
and batch/v1 Job (:func:`batch_job`), instances of one class, not forks of the shell.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ... import constants as c
from ...config import MANAGE_JOBS_ALL, MANAGE_JOBS_OFF, OperatorConfig
from ...json_types import JsonDict
from .model import JobStatus, job_status_to_dict, spec_defaults_patch, status_to_dict


def _stored_as_is(status: JobStatus) -> JobStatus:
    return status


def _no_spec_defaults(spec: Mapping[str, Any]) -> JsonDict | None:
    """A batch/v1 Job is defaulted by the API server itself (SetDefaults_Job)."""
    return None


@dataclass(frozen=True)
class JobKind:
    group: str
    version: str
    plural: str
    kind: str
    #: The prefix of the pod labels and annotations: ``<prefix>/job-name``,
    #: ``<prefix>/controller-uid``, ``<prefix>/job-completion-index``, ...
    key_prefix: str
    #: The tracking finalizer of the pods of a job that names the operator.
    finalizer: str
    #: The spec fields the operator writes when the API server did not default them.
    spec_defaults: Callable[[Mapping[str, Any]], JsonDict | None]
    #: Whether ``status.durationText`` must be refreshed for DURATION to show (a CRD's
    #: printer columns cannot compute it; the API server prints a Job's itself).
    refresh_duration: bool
    #: The values of spec.managedBy whose jobs the operator reconciles (None: unset).
    controllers: frozenset[str | None] = frozenset({None, c.MANAGED_BY})
    #: The built-in controller's finalizer, for the pods of the jobs the operator runs
    #: in its stead (spec.managedBy unset or the built-in's): so that the built-in can
    #: take them back without losing a count. None: the kind has no built-in.
    builtin_finalizer: str | None = None
    #: The status the kind's API stores of what the core computes (a Job's has no
    #: printed texts, selector, observed generation or back-off), and its JSON.
    stored_status: Callable[[JobStatus], JobStatus] = _stored_as_is
    status_json: Callable[[JobStatus], JsonDict] = status_to_dict
    #: Whether the operator deletes a job once ttlSecondsAfterFinished has run out (a
    #: Job's is deleted by kube-controller-manager's TTL-after-finished controller).
    deletes_expired: bool = True
    #: Whether scale-down removes the pods with the lowest
    #: controller.kubernetes.io/pod-deletion-cost first (as a ReplicaSet does): a
    #: ParallelJob's do; a batch/v1 Job keeps upstream's Job order exactly.
    honours_deletion_cost: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def job_name_label(self) -> str:
        return f"{self.key_prefix}/job-name"

    @property
    def controller_uid_label(self) -> str:
        return f"{self.key_prefix}/controller-uid"

    @property
    def completion_index_key(self) -> str:
        """The completion index's annotation, and label, on an Indexed job's pods."""
        return f"{self.key_prefix}/job-completion-index"

    @property
    def index_failure_count_key(self) -> str:
        return f"{self.key_prefix}/job-index-failure-count"

    @property
    def index_ignored_failure_count_key(self) -> str:
        return f"{self.key_prefix}/job-index-ignored-failure-count"

    @property
    def finalizers(self) -> tuple[str, ...]:
        """Every tracking finalizer a pod of the kind may carry: any of them tracks it,
        and a pod released loses them all."""
        return (self.finalizer,) + ((self.builtin_finalizer,) if self.builtin_finalizer else ())

    @property
    def stores_backoff(self) -> bool:
        """Whether the kind's status keeps the pod-failure back-off across restarts."""
        probe = JobStatus(failures_since_success=1)
        return self.stored_status(probe).failures_since_success == 1

    def pod_finalizer(self, spec: Mapping[str, Any]) -> str:
        """The tracking finalizer of the pods the operator creates or adopts for a job
        (its spec): the built-in's for a job that names no controller or the built-in,
        else the operator's own."""
        if self.builtin_finalizer is not None and spec.get("managedBy") != c.MANAGED_BY:
            return self.builtin_finalizer
        return self.finalizer

    def reconciles(self, spec: Mapping[str, Any]) -> bool:
        """Whether the operator reconciles a job of this kind with this spec."""
        return spec.get("managedBy") in self.controllers

    def selector(self, uid: str) -> str:
        """The label selector (string form) of a job's pods, exposed through /scale."""
        return f"{self.controller_uid_label}={uid}"

    def path(self, namespace: str, name: str = "", subresource: str = "") -> str:
        """The API path of the kind's objects in ``namespace``: all of them, one, or
        one's subresource (``status``)."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        path = f"{root}/namespaces/{namespace}/{self.plural}"
        path += f"/{name}" if name else ""
        return path + (f"/{subresource}" if subresource else "")

    def owner_reference(self, name: str, uid: str) -> JsonDict:
        """The controller reference a job's pods carry (blockOwnerDeletion, as upstream)."""
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": name,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def owns(self, meta: Mapping[str, Any]) -> bool:
        """Whether a pod's metadata says it is of this kind: its controller reference
        names the kind, or, an orphan, it carries the kind's controller-uid label."""
        for ref in meta.get("ownerReferences") or ():
            if isinstance(ref, Mapping) and ref.get("controller") is True:
                return ref.get("kind") == self.kind and ref.get("apiVersion") == self.api_version
        return self.controller_uid_label in (meta.get("labels") or {})


PARALLELJOB = JobKind(
    group=c.GROUP,
    version=c.VERSION,
    plural=c.PLURAL,
    kind=c.KIND,
    key_prefix=c.GROUP,
    finalizer=c.TRACKING_FINALIZER,
    spec_defaults=spec_defaults_patch,
    refresh_duration=True,
)

#: The label every pod the operator creates carries, a Job's too: the pod watch's
#: selector (a label selector cannot say "this key or that one").
WATCH_LABEL = c.LABEL_CONTROLLER_UID


def stored_job_status(status: JobStatus) -> JobStatus:
    """What batch/v1 JobStatus stores of a status: none of ParallelJob's additions."""
    return replace(
        status,
        failures_since_success=0,
        last_failure_time=None,
        selector="",
        observed_generation=0,
        status_text="",
        completions_text="",
        duration_text="",
        containers_text="",
        images_text="",
    )


def batch_job(take_unmanaged: bool) -> JobKind:
    """batch/v1 Job. The operator reconciles the Jobs whose spec.managedBy names it;
    with ``take_unmanaged`` (a cluster without the built-in Job controller) also those
    that name no controller or the built-in, whose pods keep the built-in's finalizer."""
    controllers: frozenset[str | None] = frozenset({c.MANAGED_BY})
    if take_unmanaged:
        controllers |= {None, c.BUILTIN_JOB_CONTROLLER}
    return JobKind(
        group=c.JOB_GROUP,
        version=c.JOB_VERSION,
        plural=c.JOB_PLURAL,
        kind=c.JOB_KIND,
        key_prefix=c.JOB_KEY_PREFIX,
        finalizer=c.TRACKING_FINALIZER,
        spec_defaults=_no_spec_defaults,
        refresh_duration=False,
        controllers=controllers,
        builtin_finalizer=c.JOB_TRACKING_FINALIZER,
        stored_status=stored_job_status,
        status_json=job_status_to_dict,
        deletes_expired=False,
        honours_deletion_cost=False,
    )


def kind_of_pod(meta: Mapping[str, Any], kinds: Iterable[JobKind]) -> JobKind | None:
    """The kind (of ``kinds``, in order) a pod is of, by its metadata; None: none."""
    for kind in kinds:
        if kind.owns(meta):
            return kind
    return None


#: What a pod event is read as when no Job controller runs (the keys are the same for
#: both settings of batch_job).
_JOB_PODS = batch_job(take_unmanaged=False)
#: The labels that make a pod one of a job's: the operator's, or a Job's (all mode).
_POD_LABELS = (WATCH_LABEL, _JOB_PODS.controller_uid_label)
_TRACKING_FINALIZERS = frozenset(_JOB_PODS.finalizers + PARALLELJOB.finalizers)


def job_kinds(config: OperatorConfig) -> tuple[JobKind, ...]:
    """The kinds of job the operator reconciles with these settings, a pod's kind looked
    up in this order (a Job's pods made by the operator carry both kinds' labels)."""
    if config.manage_jobs == MANAGE_JOBS_OFF:
        return (PARALLELJOB,)
    return (batch_job(take_unmanaged=config.manage_jobs == MANAGE_JOBS_ALL), PARALLELJOB)


def is_jobs_pod(meta: Mapping[str, Any]) -> bool:
    """A pod labelled as a job's; or one that was and still holds a tracking finalizer
    (its labels removed: with PJ_MANAGE_JOBS=all no server-side selector turns that
    into a DELETED event, and its job must release it, as upstream's ref manager does)."""
    labels = meta.get("labels") or {}
    finalizers = meta.get("finalizers") or ()
    return any(label in labels for label in _POD_LABELS) or any(
        f in _TRACKING_FINALIZERS for f in finalizers
    )


def pods_path(namespace: str) -> str:
    """The API path of the pods of ``namespace`` ("": of all namespaces)."""
    return f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"


def jobs_path(kind: JobKind, namespace: str) -> str:
    """The API path of a kind's jobs in ``namespace`` ("": in all namespaces)."""
    if namespace:
        return kind.path(namespace)
    root = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    return f"{root}/{kind.plural}"
