"""A job's pods from its template (``core/job/pods.py``): the bodies of the pods a sync's
plan creates, as manageJob builds them (GetPodFromTemplate, and for an Indexed job
addCompletionIndexEnvVariables and the per-index template; upstream checks them in
job_controller_test.go's checkIndexedJobPods and checkJobCompletionEnvVariable)."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.core.job.index_templates import COMPLETION_INDEX_ENV_NAME
from paralleljob.core.job.kind import PARALLELJOB
from paralleljob.core.job.model import (
    PodInfo,
    parse_job,
)
from paralleljob.core.job.pods import build_pod, new_pod_bodies
from paralleljob.core.job.sync import PodPlan
from paralleljob.json_types import JsonDict

COMPLETION_INDEX_ANNOTATION = PARALLELJOB.completion_index_key
COMPLETION_INDEX_LABEL = PARALLELJOB.completion_index_key
INDEX_FAILURE_COUNT_ANNOTATION = PARALLELJOB.index_failure_count_key
INDEX_IGNORED_FAILURE_COUNT_ANNOTATION = PARALLELJOB.index_ignored_failure_count_key

ENV = {
    "name": COMPLETION_INDEX_ENV_NAME,
    "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{COMPLETION_INDEX_LABEL}']"}},
}


def job(**spec: Any) -> dict[str, Any]:
    """A ParallelJob's JSON named "pj" whose template labels its pods app=x."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": "pj", "namespace": "ns", "uid": "u-1"},
        "spec": {
            **spec,
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]},
            },
        },
    }


def indexed(**spec: Any) -> dict[str, Any]:
    return job(completionMode="Indexed", completions=4, parallelism=4, **spec)


def _bodies(body: dict[str, Any], plan: PodPlan) -> Iterator[JsonDict]:
    return new_pod_bodies(body, parse_job(body), plan, PARALLELJOB)


def test_a_non_indexed_job_s_pods_all_come_from_its_template() -> None:
    """As many as the caller takes, each build_pod(job), each its own copy."""
    body = job(completions=3, parallelism=3)
    before = copy.deepcopy(body)
    pods = list(itertools.islice(_bodies(body, PodPlan(create=3)), 3))
    assert pods == [build_pod(body, PARALLELJOB)] * 3
    assert pods[0]["metadata"]["generateName"] == "pj-"
    pods[0]["spec"]["containers"].append({})
    assert pods[1]["spec"]["containers"] == [{"name": "c", "image": "i"}]
    assert body == before


def test_an_indexed_job_gets_one_pod_per_index_in_order() -> None:
    """checkIndexedJobPods: the index's annotation and label, hostname <job>-<index>,
    generateName <job>-<index>-, JOB_COMPLETION_INDEX from the label; then no more."""
    body = indexed()
    before = copy.deepcopy(body)
    pods = list(_bodies(body, PodPlan(create=2, create_indexes=(0, 3))))
    assert [p["metadata"]["generateName"] for p in pods] == ["pj-0-", "pj-3-"]
    assert [p["spec"]["hostname"] for p in pods] == ["pj-0", "pj-3"]
    first = pods[0]["metadata"]
    assert first["annotations"] == {COMPLETION_INDEX_ANNOTATION: "0"}
    assert first["labels"] == {
        "app": "x",
        COMPLETION_INDEX_LABEL: "0",
        c.LABEL_JOB_NAME: "pj",
        c.LABEL_CONTROLLER_UID: "u-1",
    }
    assert first["finalizers"] == [c.TRACKING_FINALIZER]
    assert pods[1]["metadata"]["labels"][COMPLETION_INDEX_LABEL] == "3"
    assert pods[0]["spec"]["containers"] == [{"name": "c", "image": "i", "env": [ENV]}]
    assert body == before


@pytest.mark.parametrize(
    ("replaced", "want"),
    [
        pytest.param(None, {INDEX_FAILURE_COUNT_ANNOTATION: "0"}, id="an index's first pod"),
        pytest.param(
            PodInfo("old", "old", c.FAILED, completion_index=2, index_failure_count=1),
            {INDEX_FAILURE_COUNT_ANNOTATION: "2"},
            id="a failed pod's count carried on, plus its own failure",
        ),
        pytest.param(
            PodInfo(
                "old",
                "old",
                c.FAILED,
                completion_index=2,
                index_failure_count=1,
                index_ignored_failure_count=4,
            ),
            {INDEX_FAILURE_COUNT_ANNOTATION: "2", INDEX_IGNORED_FAILURE_COUNT_ANNOTATION: "4"},
            id="the ignored failures carried on too",
        ),
    ],
)
def test_with_backoff_limit_per_index_a_pod_carries_its_index_s_failures(
    replaced: PodInfo | None, want: dict[str, str]
) -> None:
    """addIndexFailureCountAnnotation, from the plan's replaced pods."""
    plan = PodPlan(
        create=1, create_indexes=(2,), replaced=() if replaced is None else ((2, replaced),)
    )
    [pod] = _bodies(indexed(backoffLimitPerIndex=3), plan)
    assert pod["metadata"]["annotations"] == {COMPLETION_INDEX_ANNOTATION: "2", **want}


def test_without_backoff_limit_per_index_no_failure_count() -> None:
    """Only a job with backoffLimitPerIndex counts its indexes' failures."""
    replaced = PodInfo("old", "old", c.FAILED, completion_index=1, index_failure_count=1)
    plan = PodPlan(create=1, create_indexes=(1,), replaced=((1, replaced),))
    [pod] = _bodies(indexed(), plan)
    assert pod["metadata"]["annotations"] == {COMPLETION_INDEX_ANNOTATION: "1"}


def test_a_long_indexed_job_name_is_cut_before_the_index() -> None:
    """podGenerateNameWithIndex: the generateName fits MAX_GENERATE_NAME_PREFIX."""
    body = indexed()
    body["metadata"]["name"] = "j" * 60
    [pod] = _bodies(body, PodPlan(create=1, create_indexes=(12,)))
    assert pod["metadata"]["generateName"] == "j" * 54 + "-12-"
    assert len(pod["metadata"]["generateName"]) == c.MAX_GENERATE_NAME_PREFIX
