"""Building a job's pods from its template, as the Job controller does: one pod
(``GetPodFromTemplate``), and the bodies of the pods a sync's plan creates (for an
Indexed job, each from its index's template: :func:`.index_templates.pod_templates`)."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from ... import constants as c
from ...json_types import JsonDict
from .index_templates import pod_templates
from .job_restart_policy import ATTEMPT_LABEL, attempt_labels
from .kind import WATCH_LABEL, JobKind
from .model import Job
from .sync import PodPlan


def job_template(job: Mapping[str, Any]) -> Mapping[str, Any]:
    """The job's pod template (spec.template)."""
    template: Mapping[str, Any] = job.get("spec", {}).get("template", {}) or {}
    return template


def build_pod(
    job: Mapping[str, Any],
    kind: JobKind,
    template: Mapping[str, Any] | None = None,
    generate_name: str | None = None,
    attempt: int = 0,
) -> JsonDict:
    """A pod named ``<job>-<5 random chars>`` (generateName), labelled with the job's name
    and uid (and the uid under the label the operator's pod watch selects, which a
    Job's pods would not have), controlled by the job and carrying the tracking finalizer
    (GetPodFromTemplate). An Indexed job's pod comes from its index's ``template`` and
    ``generate_name`` (``index_templates.pod_templates``, see :func:`new_pod_bodies`). The
    pods of a restarted job (spec.restartPolicy) are labelled with its ``attempt``."""
    meta = job["metadata"]
    if template is None:
        template = job_template(job)
    tmeta = template.get("metadata", {}) or {}
    labels = dict(tmeta.get("labels", {}) or {})
    labels[kind.job_name_label] = meta["name"]
    labels[kind.controller_uid_label] = meta["uid"]
    labels[WATCH_LABEL] = meta["uid"]
    # The attempt label is the operator's alone: one in the template (a Job's, or a
    # ParallelJob stored before the CRD refused it) would misplace a first attempt's pods.
    labels.pop(ATTEMPT_LABEL, None)
    labels.update(attempt_labels(attempt))
    finalizer = kind.pod_finalizer(job.get("spec") or {})
    finalizers = [f for f in (tmeta.get("finalizers") or []) if f != finalizer]
    finalizers.append(finalizer)
    pod_meta: JsonDict = {
        "generateName": generate_name or f"{meta['name']}-"[: c.MAX_GENERATE_NAME_PREFIX],
        "namespace": meta["namespace"],
        "labels": labels,
        "finalizers": finalizers,
        "ownerReferences": [kind.owner_reference(meta["name"], meta["uid"])],
    }
    annotations = tmeta.get("annotations")
    if annotations:
        pod_meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_meta,
        "spec": copy.deepcopy(template.get("spec", {}) or {}),
    }


def new_pod_bodies(
    body: Mapping[str, Any], job: Job, plan: PodPlan, kind: JobKind
) -> Iterator[JsonDict]:
    """The bodies of the pods ``plan`` creates for ``job`` (its JSON), built as they are
    needed, in creation order: each from the job's template, endlessly (the caller takes
    ``plan.create`` of them); or for an Indexed job one per index of
    ``plan.create_indexes``, each from its index's template (addCompletionIndexEnvVariables
    and the rest of manageJob's per-index template), carrying on the failure counts of
    the pods in ``plan.replaced``."""
    if not plan.create_indexes:
        while True:
            yield build_pod(body, kind, attempt=job.status.restarts)
    templates = pod_templates(
        job, job_template(body), plan.create_indexes, kind, dict(plan.replaced)
    )
    for template, generate_name in templates:
        yield build_pod(body, kind, template, generate_name, job.status.restarts)
