"""Parsing the API's JSON into the core's values, and back."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.core.job.kind import PARALLELJOB
from paralleljob.core.job.model import (
    INDEXED_COMPLETION,
    POD_REPLACEMENT_FAILED,
    JobSpec,
    JobStatus,
    PodFailureBackoff,
    PodInfo,
    SuccessPolicy,
    SuccessPolicyRule,
    get_deletion_cost,
    parse_job,
    parse_pod,
    parse_spec,
    parse_status,
    spec_defaults_patch,
    status_to_dict,
)
from paralleljob.core.job.pod_failure_policy import ContainerStatus, PodCondition, PodFailureFacts
from paralleljob.timeutil import format_time, parse_time
from tests.support.footprint import job_body, pod_body, pod_info, retained, wire
from tests.unit.sim import T0

COMPLETION_INDEX_ANNOTATION = PARALLELJOB.completion_index_key
INDEX_FAILURE_COUNT_ANNOTATION = PARALLELJOB.index_failure_count_key
INDEX_IGNORED_FAILURE_COUNT_ANNOTATION = PARALLELJOB.index_ignored_failure_count_key


@pytest.mark.parametrize(
    ("spec", "parallelism", "completions"),
    [
        ({}, 1, 1),
        ({"parallelism": 3}, 3, None),
        ({"completions": 5}, 1, 5),
        ({"completions": 5, "parallelism": 3}, 3, 5),
        ({"parallelism": 0}, 0, None),
    ],
)
def test_spec_defaults_as_upstream(
    spec: dict[str, Any], parallelism: int, completions: int | None
) -> None:
    parsed = parse_spec(spec)
    assert (parsed.parallelism, parsed.completions) == (parallelism, completions)
    assert parsed.backoff_limit == 6


_MODES = {"completionMode": "NonIndexed"}


@pytest.mark.parametrize(
    ("spec", "patch"),
    [
        ({}, {"parallelism": 1, "completions": 1, **_MODES}),
        ({"completions": 4}, {"parallelism": 1, **_MODES}),
        ({"parallelism": 2}, _MODES),
        ({"parallelism": 0, **_MODES}, None),
        # An unset podReplacementPolicy is read as TerminatingOrFailed, not written.
        ({"parallelism": 2, "completionMode": "Indexed"}, None),
        # SetDefaults_Job: podReplacementPolicy Failed when a podFailurePolicy is set.
        (
            {"parallelism": 2, "completionMode": "Indexed", "podFailurePolicy": {"rules": []}},
            {"podReplacementPolicy": "Failed"},
        ),
        ({"parallelism": 2, **_MODES, "podReplacementPolicy": "Failed"}, None),
        # SetDefaults_Job: backoffLimit MaxInt32 with backoffLimitPerIndex; 6 otherwise,
        # read by parse_spec but not written (it would cost every plain job a write).
        (
            {"parallelism": 2, "completionMode": "Indexed", "backoffLimitPerIndex": 1},
            {"backoffLimit": 2**31 - 1},
        ),
        (
            {
                "parallelism": 2,
                "completionMode": "Indexed",
                "backoffLimitPerIndex": 1,
                "backoffLimit": 3,
            },
            None,
        ),
        ({"parallelism": 2, **_MODES, "backoffLimit": None}, None),
    ],
)
def test_spec_defaults_patch(spec: dict[str, Any], patch: dict[str, Any] | None) -> None:
    assert spec_defaults_patch(spec) == patch


def test_restart_policy_from_template() -> None:
    spec = parse_spec({"template": {"spec": {"restartPolicy": "OnFailure"}}, "parallelism": 1})
    assert spec.restart_policy == "OnFailure"


def _pod(**overrides: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {
            "name": "job-abcde",
            "uid": "u1",
            "creationTimestamp": "2026-01-01T12:00:00Z",
            "finalizers": [c.TRACKING_FINALIZER],
        },
        "spec": {"nodeName": "node-1"},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T12:00:05Z"}
            ],
            "initContainerStatuses": [{"restartCount": 1}],
            "containerStatuses": [
                {"restartCount": 2, "state": {"running": {}}},
                {"restartCount": 4},
            ],
        },
    }
    for key, value in overrides.items():
        pod[key] = value
    return pod


def test_parse_running_pod() -> None:
    pod = parse_pod(_pod(), PARALLELJOB)
    assert pod.active and pod.ready and pod.node_assigned and pod.has_finalizer
    assert pod.restarts == 7 and pod.max_restarts == 4
    assert pod.ready_since == T0 + timedelta(seconds=5)
    assert pod.finished_at is None


def test_a_pod_info_is_slotted_and_frozen() -> None:
    pod = parse_pod(_pod(), PARALLELJOB)
    assert not hasattr(pod, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        pod.phase = c.SUCCEEDED  # type: ignore[misc]
    assert dataclasses.replace(pod, phase=c.SUCCEEDED).phase == c.SUCCEEDED
    assert PodInfo("n", "u") == PodInfo("n", "u") and hash(PodInfo("n", "u"))


def test_the_pods_of_a_job_share_their_repeated_strings() -> None:
    """Parsed from separate events (every string a copy), a job's pods hold one copy
    of their namespace, phase and job uid (label and controller reference)."""
    job = job_body(1)
    first, second = (parse_pod(json.loads(wire(pod_body(job, k))), PARALLELJOB) for k in (0, 1))
    assert first.uid != second.uid
    for attribute in ("namespace", "phase", "label_uid", "controller_uid"):
        assert getattr(first, attribute) is getattr(second, attribute), attribute


def test_a_pod_info_keeps_a_few_hundred_bytes() -> None:
    """Bytes per PodInfo of 5 KB running pods as the API server returns them, five a
    job (tests/support/footprint.py): 775 before slots and shared strings."""
    jobs = [job_body(i) for i in range(100)]
    payloads = [wire(pod_body(job, k)) for job in jobs for k in range(5)]
    assert 4_500 < sum(map(len, payloads)) / len(payloads) < 5_500
    assert retained(pod_info, payloads) < 520


def test_parse_finished_pod_uses_latest_container_finish() -> None:
    status = {
        "phase": "Failed",
        "containerStatuses": [
            {"state": {"terminated": {"finishedAt": "2026-01-01T12:00:09Z"}}},
            {"state": {"terminated": {"finishedAt": "2026-01-01T12:00:07Z"}}},
        ],
    }
    pod = parse_pod(_pod(status=status), PARALLELJOB)
    assert pod.failed and not pod.active
    assert pod.finished_at == T0 + timedelta(seconds=9)


def test_parse_deleted_pod_finish_is_deletion_minus_grace() -> None:
    meta = {
        "name": "p",
        "uid": "u",
        "deletionTimestamp": "2026-01-01T12:00:30Z",
        "deletionGracePeriodSeconds": 30,
    }
    pod = parse_pod({"metadata": meta, "status": {"phase": "Running"}}, PARALLELJOB)
    assert pod.deleting and pod.terminating and pod.failed and not pod.has_finalizer
    assert pod.finished_at == T0


def test_status_round_trip() -> None:
    status = JobStatus(
        start_time=T0,
        succeeded=3,
        uncounted_failed=("a", "b"),
        failures_since_success=2,
        last_failure_time=T0,
        completions_text="3/5",
    )
    assert parse_status(status_to_dict(status)) == status


def test_parse_job() -> None:
    job = parse_job(
        {
            "metadata": {
                "name": "j",
                "namespace": "ns",
                "uid": "u",
                "generation": 4,
                "resourceVersion": "77",
                "deletionTimestamp": "2026-01-01T12:00:00Z",
            },
            "spec": {"completions": 2, "parallelism": 2, "backoffLimit": 0, "suspend": True},
        }
    )
    assert job.deleting and job.generation == 4 and job.resource_version == "77"
    assert job.spec == JobSpec(completions=2, parallelism=2, backoff_limit=0, suspend=True)


def test_times() -> None:
    assert parse_time("2026-01-01T12:00:00Z") == T0
    assert parse_time("2026-01-01T12:00:00.5Z") == T0 + timedelta(seconds=0.5)
    assert parse_time(None) is None and parse_time("nope") is None
    assert format_time(T0 + timedelta(seconds=0.7)) == "2026-01-01T12:00:00Z"


# ------------------------------------------------- issue 12: Indexed, podReplacementPolicy
def test_new_spec_fields_are_parsed() -> None:
    spec = parse_spec(
        {
            "parallelism": 2,
            "completions": 4,
            "completionMode": "Indexed",
            "podReplacementPolicy": "Failed",
            "successPolicy": {
                "rules": [{"succeededIndexes": "0-2", "succeededCount": 2}, {"succeededCount": 3}]
            },
            "backoffLimitPerIndex": 1,
            "maxFailedIndexes": 2,
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": []}]},
            "managedBy": "example.com/other",
        }
    )
    assert spec.completion_mode == INDEXED_COMPLETION and spec.indexed
    assert spec.pod_replacement_policy == POD_REPLACEMENT_FAILED and spec.only_replace_failed
    assert spec.success_policy == SuccessPolicy(
        rules=(SuccessPolicyRule("0-2", 2), SuccessPolicyRule(None, 3))
    )
    assert (spec.backoff_limit_per_index, spec.max_failed_indexes) == (1, 2)
    assert spec.backoff_limit == 2**31 - 1, "SetDefaults_Job with backoffLimitPerIndex"
    assert spec.pod_failure_policy is not None and len(spec.pod_failure_policy.rules) == 1
    assert spec.managed_by == "example.com/other"


TOF = "TerminatingOrFailed"


@pytest.mark.parametrize(
    ("raw", "mode", "replacement", "indexed", "only_failed"),
    [
        ({}, "NonIndexed", "TerminatingOrFailed", False, False),
        (
            {"completionMode": "Indexed", "completions": 3},
            "Indexed",
            "TerminatingOrFailed",
            True,
            False,
        ),
        # The API requires completions for Indexed: without, it runs as NonIndexed.
        (
            {"completionMode": "Indexed", "parallelism": 2},
            "Indexed",
            "TerminatingOrFailed",
            False,
            False,
        ),
        ({"podFailurePolicy": {"rules": []}}, "NonIndexed", "Failed", False, True),
        # Kubernetes 1.37's onlyReplaceFailedPods reads the field alone (the API
        # rejects this pair; 1.34 replaced only failed pods whatever the field said).
        (
            {"podFailurePolicy": {}, "podReplacementPolicy": "TerminatingOrFailed"},
            "NonIndexed",
            "TerminatingOrFailed",
            False,
            False,
        ),
    ],
)
def test_completion_mode_and_pod_replacement_policy_defaults(
    raw: dict[str, Any], mode: str, replacement: str, indexed: bool, only_failed: bool
) -> None:
    spec = parse_spec(raw)
    assert (spec.completion_mode, spec.pod_replacement_policy) == (mode, replacement)
    assert (spec.indexed, spec.only_replace_failed) == (indexed, only_failed)
    assert spec.success_policy is None and spec.managed_by is None
    assert spec.backoff_limit == 6


def test_index_annotations_are_parsed_into_the_pod_info() -> None:
    meta = {
        "name": "job-2-abcde",
        "uid": "u",
        "annotations": {
            COMPLETION_INDEX_ANNOTATION: "2",
            INDEX_FAILURE_COUNT_ANNOTATION: "3",
            INDEX_IGNORED_FAILURE_COUNT_ANNOTATION: "x",
        },
    }
    pod = parse_pod({"metadata": meta}, PARALLELJOB)
    assert (pod.completion_index, pod.index_failure_count, pod.index_ignored_failure_count) == (
        2,
        3,
        0,
    )
    plain = parse_pod(_pod(), PARALLELJOB)
    assert (plain.completion_index, plain.index_failure_count) == (None, 0)


def test_indexed_status_fields_round_trip_and_are_omitted_when_unset() -> None:
    status = JobStatus(succeeded=3, completed_indexes="0-2", failed_indexes="")
    body = status_to_dict(status)
    assert (body["completedIndexes"], body["failedIndexes"]) == ("0-2", "")
    assert parse_status(body) == status
    # Upstream omits an empty completedIndexes and an unset failedIndexes: the merge
    # patch clears them (None), and they read back as unset.
    empty = status_to_dict(JobStatus())
    assert (empty["completedIndexes"], empty["failedIndexes"]) == (None, None)
    assert parse_status({k: v for k, v in empty.items() if v is not None}) == JobStatus()
    assert parse_status({"completedIndexes": "1", "failedIndexes": "0"}).failed_indexes == "0"


# -------------------------------------- issue 12: pod failure facts, printer text, back-off
def _failed_status(**more: Any) -> dict[str, Any]:
    return {
        "phase": "Failed",
        "conditions": [{"type": "DisruptionTarget", "status": "True"}],
        "initContainerStatuses": [
            {"name": "init", "state": {"terminated": {"exitCode": 0}}, "restartCount": 0}
        ],
        "containerStatuses": [
            {"name": "main", "state": {"terminated": {"exitCode": 42}}},
            {"name": "side", "state": {"running": {}}},
        ],
        **more,
    }


def test_a_failed_pod_keeps_what_a_pod_failure_policy_matches() -> None:
    pod = parse_pod(
        _pod(metadata={"name": "p", "namespace": "ns", "uid": "u"}, status=_failed_status()),
        PARALLELJOB,
    )
    assert pod.failure == PodFailureFacts(
        namespace="ns",
        name="p",
        init_container_statuses=(ContainerStatus("init", 0),),
        container_statuses=(ContainerStatus("main", 42), ContainerStatus("side", None)),
        conditions=(PodCondition("DisruptionTarget", "True"),),
    )


@pytest.mark.parametrize(
    ("metadata", "status", "kept"),
    [
        pytest.param({}, {"phase": "Running"}, False, id="running"),
        pytest.param({}, {"phase": "Succeeded"}, False, id="succeeded"),
        pytest.param({}, {"phase": "Pending"}, False, id="pending"),
        pytest.param({}, _failed_status(), True, id="failed"),
        pytest.param(
            {"deletionTimestamp": "2026-01-01T12:00:30Z"}, {"phase": "Running"}, True, id="deleting"
        ),
        pytest.param(
            {},
            {"phase": "Running", "containerStatuses": [{"state": {"terminated": {"exitCode": 0}}}]},
            False,
            id="running, a container exited 0",
        ),
        pytest.param(
            {},
            {"phase": "Running", "containerStatuses": [{"state": {"terminated": {"exitCode": 5}}}]},
            True,
            id="running, a container exited 5",
        ),
        pytest.param(
            {},
            {
                "phase": "Pending",
                "initContainerStatuses": [{"state": {"terminated": {"exitCode": 1}}}],
            },
            True,
            id="pending, an init container exited 1",
        ),
    ],
)
def test_only_pods_that_failed_or_end_keep_failure_facts(
    metadata: dict[str, Any], status: dict[str, Any], kept: bool
) -> None:
    """A running pod keeps no exit codes nor conditions: 10k running pods cost no more."""
    meta = {"name": "p", "uid": "u", **metadata}
    assert (
        parse_pod({"metadata": meta, "status": status}, PARALLELJOB).failure is not None
    ) == kept


@pytest.mark.parametrize(
    ("containers", "names", "images"),
    [
        ([], "", ""),
        ([{"name": "main", "image": "busybox:1.36"}], "main", "busybox:1.36"),
        (
            [{"name": "a", "image": "x"}, {"name": "b"}, {"image": "z"}],
            "a,b,",
            "x,,z",
        ),
    ],
)
def test_containers_and_images_text_as_kubectl_lays_them_out(
    containers: list[dict[str, Any]], names: str, images: str
) -> None:
    """layoutContainerCells: joined by ",", init containers left out."""
    spec = parse_spec(
        {
            "template": {
                "spec": {
                    "initContainers": [{"name": "init", "image": "i"}],
                    "containers": containers,
                }
            }
        }
    )
    assert (spec.containers_text, spec.images_text) == (names, images)


def test_printer_text_round_trips_in_status() -> None:
    status = JobStatus(containers_text="a,b", images_text="x,y")
    body = status_to_dict(status)
    assert (body["containersText"], body["imagesText"]) == ("a,b", "x,y")
    assert parse_status(body) == status


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ({}, None),
        ({"podFailureBackoff": {}}, PodFailureBackoff()),
        ({"podFailureBackoff": {"initialSeconds": 1, "maxSeconds": 60}}, PodFailureBackoff(1, 60)),
        ({"podFailureBackoff": {"maxSeconds": 60}}, PodFailureBackoff(None, 60)),
        ({"podFailureBackoff": {"initialSeconds": 0, "maxSeconds": "x"}}, PodFailureBackoff()),
    ],
)
def test_pod_failure_backoff_is_parsed(raw: dict[str, Any], want: PodFailureBackoff | None) -> None:
    assert parse_spec(raw).pod_failure_backoff == want


@pytest.mark.parametrize(
    ("value", "cost"),
    [
        # helper.GetDeletionCostFromPodAnnotations and its test cases.
        (None, 0),
        ("10", 10),
        ("-100", -100),
        ("0", 0),
        ("-0", 0),
        ("-007", -7),
        ("2147483647", 2**31 - 1),
        ("-2147483648", -(2**31)),
        ("2147483648", 0),  # out of int32: invalid, 0
        ("+10", 0),  # a leading plus sign is invalid
        ("008", 0),  # a leading zero is invalid
        ("", 0),
        ("-", 0),
        ("1_000", 0),
        (" 5", 0),
        ("5 ", 0),
        ("٣", 0),  # a non-ASCII digit
        ("ten", 0),
        (10, 0),  # not a string
    ],
)
def test_parse_pod_deletion_cost(value: object, cost: int) -> None:
    pod = _pod()
    if value is not None:
        pod["metadata"]["annotations"] = {c.POD_DELETION_COST: value}
    assert get_deletion_cost(pod["metadata"].get("annotations") or {}) == cost
    assert parse_pod(pod, PARALLELJOB).deletion_cost == cost
