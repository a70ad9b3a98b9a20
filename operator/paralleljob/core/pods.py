"""Building a job's pods from its template, as the Job controller does: one pod
(``GetPodFromTemplate``), and the bodies of the pods a sync's plan creates (for an
Indexed job, each from its index's template: :func:`.indexed.pod_templates`)."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from .. import constants as c
from ..json_types import JsonDict
from .indexed import pod_templates
from .model import parse_job
from .sync import PodPlan


def owner_reference(job: Mapping[str, Any]) -> JsonDict:
    meta = job["metadata"]
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_labels(job_name: str, job_uid: str) -> dict[str, str]:
    return {c.LABEL_JOB_NAME: job_name, c.LABEL_CONTROLLER_UID: job_uid}


def job_template(job: Mapping[str, Any]) -> Mapping[str, Any]:
    """The job's pod template (spec.template)."""
    template: Mapping[str, Any] = job.get("spec", {}).get("template", {}) or {}
    return template


def build_pod(
    job: Mapping[str, Any],
    template: Mapping[str, Any] | None = None,
    generate_name: str | None = None,
) -> JsonDict:
    """A pod named ``<job>-<5 random chars>`` (generateName), labelled with the job's name
    and uid, controlled by the job and carrying the tracking finalizer
    (GetPodFromTemplate). An Indexed job's pod comes from its index's ``template`` and
    ``generate_name`` (``indexed.pod_templates``, see :func:`new_pod_bodies`)."""
    meta = job["metadata"]
    if template is None:
        template = job_template(job)
    tmeta = template.get("metadata", {}) or {}
    labels = dict(tmeta.get("labels", {}) or {})
    labels.update(pod_labels(meta["name"], meta["uid"]))
    finalizers = [f for f in (tmeta.get("finalizers") or []) if f != c.TRACKING_FINALIZER]
    finalizers.append(c.TRACKING_FINALIZER)
    pod_meta: JsonDict = {
        "generateName": generate_name or f"{meta['name']}-"[: c.MAX_GENERATE_NAME_PREFIX],
        "namespace": meta["namespace"],
        "labels": labels,
        "finalizers": finalizers,
        "ownerReferences": [owner_reference(job)],
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


def new_pod_bodies(job: Mapping[str, Any], plan: PodPlan) -> Iterator[JsonDict]:
    """The bodies of the pods ``plan`` creates for ``job`` (its JSON), built as they are
    needed, in creation order: each from the job's template, endlessly (the caller takes
    ``plan.create`` of them); or for an Indexed job one per index of
    ``plan.create_indexes``, each from its index's template (addCompletionIndexEnvVariables
    and the rest of manageJob's per-index template), carrying on the failure counts of
    the pods in ``plan.replaced``."""
    if not plan.create_indexes:
        while True:
            yield build_pod(job)
    parsed = parse_job(job)
    templates = pod_templates(parsed, job_template(job), plan.create_indexes, dict(plan.replaced))
    for template, generate_name in templates:
        yield build_pod(job, template, generate_name)
