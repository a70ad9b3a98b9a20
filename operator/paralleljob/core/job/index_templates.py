"""An Indexed job's new pods' templates: the completion index's environment variable,
annotation and label, the pod's hostname and generateName, and the index's failure counts
carried on (``indexed_job_utils.go``'s ``addCompletionIndexEnvVariables``,
``addCompletionIndexAnnotation``, ``addCompletionIndexLabel``,
``addIndexFailureCountAnnotation``, ``podGenerateNameWithIndex`` and ``manageJob``'s
per-index template). Pod templates are JSON dicts: each function returns a changed deep
copy and never mutates its input (upstream mutates the template)."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from ... import constants as c
from ...json_types import JsonDict
from .indexed import get_new_index_failure_counts, has_backoff_limit_per_index
from .kind import JobKind
from .model import Job, PodInfo

#: completionIndexEnvName.
COMPLETION_INDEX_ENV_NAME: Final = "JOB_COMPLETION_INDEX"


def _metadata_map(template: JsonDict, field: str) -> dict[str, Any]:
    """template.metadata.<field> of a deep copy, created when missing."""
    meta = template.get("metadata")
    if not isinstance(meta, dict):
        meta = template["metadata"] = {}
    values = meta.get(field)
    if not isinstance(values, dict):
        values = meta[field] = {}
    return values


def _completion_index_env_var(kind: JobKind, from_label: bool) -> JsonDict:
    where = "labels" if from_label else "annotations"
    key = kind.completion_index_key
    return {
        "name": COMPLETION_INDEX_ENV_NAME,
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.{where}['{key}']"}},
    }


def _add_completion_index_env_variable(
    container: JsonDict, kind: JobKind, from_label: bool
) -> None:
    """addCompletionIndexEnvVariable: appended unless the container already sets it."""
    env = container.get("env")
    if not isinstance(env, list):
        env = container["env"] = []
    if any(isinstance(v, Mapping) and v.get("name") == COMPLETION_INDEX_ENV_NAME for v in env):
        return
    env.append(_completion_index_env_var(kind, from_label))


def add_completion_index_env_variables(
    template: Mapping[str, Any], kind: JobKind, *, from_label: bool = True
) -> JsonDict:
    """addCompletionIndexEnvVariables: a copy of the pod template whose init containers
    and containers all get ``JOB_COMPLETION_INDEX`` from the downward API, unless they
    already set it.

    The field path reads the completion-index label, as upstream does since the
    ``PodIndexLabel`` gate (removed in v1.35: always on), so the pod needs
    :func:`add_completion_index_label`; ``from_label=False`` reads the annotation, as
    upstream did with the gate off.
    """
    out: JsonDict = copy.deepcopy(dict(template))
    spec = out.get("spec")
    if not isinstance(spec, dict):
        return out
    for field in ("initContainers", "containers"):
        containers = spec.get(field)
        for container in containers if isinstance(containers, list) else []:
            if isinstance(container, dict):
                _add_completion_index_env_variable(container, kind, from_label)
    return out


def add_completion_index_annotation(
    template: Mapping[str, Any], index: int, kind: JobKind
) -> JsonDict:
    """addCompletionIndexAnnotation: a copy of the template annotated with ``index``."""
    out: JsonDict = copy.deepcopy(dict(template))
    _metadata_map(out, "annotations")[kind.completion_index_key] = str(index)
    return out


def add_completion_index_label(template: Mapping[str, Any], index: int, kind: JobKind) -> JsonDict:
    """addCompletionIndexLabel: a copy of the template labelled with ``index`` (the label
    has the annotation's key, for consistency)."""
    out: JsonDict = copy.deepcopy(dict(template))
    _metadata_map(out, "labels")[kind.completion_index_key] = str(index)
    return out


def add_index_failure_count_annotation(
    template: Mapping[str, Any], job: Job, pod_being_replaced: PodInfo | None, kind: JobKind
) -> JsonDict:
    """addIndexFailureCountAnnotation: a copy of the template with the index's failure
    count (always) and ignored failure count (only when above 0) for the new pod."""
    failures, ignored = get_new_index_failure_counts(job, pod_being_replaced)
    out: JsonDict = copy.deepcopy(dict(template))
    annotations = _metadata_map(out, "annotations")
    annotations[kind.index_failure_count_key] = str(failures)
    if ignored > 0:
        annotations[kind.index_ignored_failure_count_key] = str(ignored)
    return out


def pod_hostname(job_name: str, index: int) -> str:
    """The pod's spec.hostname, ``<job>-<index>`` (manageJob). Upstream does not cut it:
    API validation of an Indexed job's name keeps ``<name>-<completions - 1>`` a DNS
    label."""
    return f"{job_name}-{index}"


def pod_generate_name_with_index(job_name: str, index: int) -> str:
    """podGenerateNameWithIndex: ``<job>-<index>-``, the job name cut so that the prefix
    fits names.MaxGeneratedNameLength (58: 63 minus the 5 random characters). Upstream
    cuts bytes; a job name is a DNS label, so bytes are characters."""
    suffix = f"-{index}-"
    prefix = job_name + suffix
    if len(prefix) > c.MAX_GENERATE_NAME_PREFIX:
        prefix = prefix[: c.MAX_GENERATE_NAME_PREFIX - len(suffix)] + suffix
    return prefix


def template_for_index(
    template: Mapping[str, Any],
    job: Job,
    index: int,
    pods_with_delayed_deletion: Mapping[int, PodInfo],
    kind: JobKind,
) -> tuple[JsonDict, str]:
    """The per-index part of manageJob's pod creation: a copy of ``template`` (already
    given the env variable by add_completion_index_env_variables) with the index's
    annotation, label and hostname and, with backoffLimitPerIndex, the failure counts
    carried on from the index's delayed failed pod; and the pod's generateName."""
    annotated = add_completion_index_annotation(template, index, kind)
    out = add_completion_index_label(annotated, index, kind)
    spec = out.get("spec")
    if not isinstance(spec, dict):
        spec = out["spec"] = {}
    spec["hostname"] = pod_hostname(job.name, index)
    if has_backoff_limit_per_index(job.spec):
        replaced = pods_with_delayed_deletion.get(index)
        out = add_index_failure_count_annotation(out, job, replaced, kind)
    return out, pod_generate_name_with_index(job.name, index)


def pod_templates(
    job: Job,
    template: Mapping[str, Any],
    indexes: Iterable[int],
    kind: JobKind,
    delayed: Mapping[int, PodInfo] | None = None,
) -> Iterator[tuple[JsonDict, str]]:
    """manageJob's pod templates for ``indexes``, in order: ``template`` given the
    JOB_COMPLETION_INDEX variable once, then for each index its annotation, label and
    hostname, with the pod's generateName, and with backoffLimitPerIndex the index's
    failure counts carried on from its last failed pod in ``delayed``
    (template_for_index)."""
    base = add_completion_index_env_variables(template, kind)
    for index in indexes:
        yield template_for_index(base, job, index, delayed or {}, kind)
