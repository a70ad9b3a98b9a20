"""Indexed completion mode, case by case as upstream tests it
(pkg/controller/job/indexed_job_utils_test.go at Kubernetes v1.37.2); the new pods' templates
(index_templates.py) with them, as upstream tests them in the same file.

Every upstream case of the ported tests is here with the same inputs and expectations,
under the upstream case name as its id. Upstream builds pods with ``buildPod()`` and
``hollowPodsWithIndexPhase``; here :func:`build_pod` and :func:`hollow` build the same
pods through :func:`indexed_pod`, so the annotations are parsed as in production. Where
an upstream case sets a podFailurePolicy, the job has that policy and the pod what its
rule matches (an exit code, a pod condition). Cases marked "not upstream" are this project's own.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.core.job.index_templates import (
    COMPLETION_INDEX_ENV_NAME,
    add_completion_index_annotation,
    add_completion_index_env_variables,
    add_completion_index_label,
    add_index_failure_count_annotation,
    pod_generate_name_with_index,
    pod_hostname,
    template_for_index,
)
from paralleljob.core.job.indexed import (
    append_duplicated_index_pods_for_removal,
    by_completion_index,
    calculate_failed_indexes,
    calculate_succeeded_indexes,
    first_pending_indexes,
    get_new_index_failure_counts,
    get_pods_with_delayed_deletion_per_index,
    is_index_failed,
)
from paralleljob.core.job.intervals import OrderedIntervals
from paralleljob.core.job.kind import PARALLELJOB
from paralleljob.core.job.model import (
    POD_REPLACEMENT_FAILED,
    POD_REPLACEMENT_TERMINATING_OR_FAILED,
    Job,
    JobStatus,
    PodInfo,
    get_completion_index,
    get_index_failure_count,
    parse_pod,
)
from paralleljob.core.job.pod_failure_policy import (
    ACTION_FAIL_INDEX,
    ACTION_IGNORE,
    OPERATOR_IN,
    ContainerStatus,
    OnExitCodes,
    OnPodConditionsPattern,
    PodCondition,
    PodFailureFacts,
    PodFailurePolicy,
    PodFailurePolicyRule,
)
from tests.unit.core.specs import indexed_spec
from tests.unit.indexed_pods import indexed_pod
from tests.unit.sim import T0

COMPLETION_INDEX_ANNOTATION = PARALLELJOB.completion_index_key
COMPLETION_INDEX_LABEL = PARALLELJOB.completion_index_key
INDEX_FAILURE_COUNT_ANNOTATION = PARALLELJOB.index_failure_count_key
INDEX_IGNORED_FAILURE_COUNT_ANNOTATION = PARALLELJOB.index_ignored_failure_count_key

S, F, P, R = c.SUCCEEDED, c.FAILED, c.PENDING, c.RUNNING
#: The pod condition of a disrupted pod (v1.DisruptionTarget).
DISRUPTED = "DisruptionTarget"
#: Upstream's noIndex: a pod without the completion-index annotation.
NO_INDEX = "-"
MAX_INT32 = 2**31 - 1


def hollow(index: str, phase: str) -> PodInfo:
    """hollowPodsWithIndexPhase: a pod with only a phase and, unless NO_INDEX, the
    completion-index annotation. The name keeps the annotation, for :func:`index_phases`."""
    annotations = {} if index == NO_INDEX else {COMPLETION_INDEX_ANNOTATION: index}
    return indexed_pod(PodInfo(name=index, uid=f"{index}/{phase}", phase=phase), annotations)


def hollows(descs: Sequence[tuple[str, str]]) -> list[PodInfo]:
    return [hollow(index, phase) for index, phase in descs]


def index_phases(pods: Sequence[PodInfo]) -> list[tuple[str, str]]:
    """toIndexPhases."""
    return [(p.name, p.phase) for p in pods]


def build_pod(
    uid: str = "",
    *,
    index: str | None = None,
    failure_count: str | None = None,
    phase: str = P,
    finalizer: bool = False,
    deleted_at: datetime | None = None,
    exit_code: int | None = None,
    condition: str | None = None,
) -> PodInfo:
    """buildPod().uid().index().indexFailureCount().phase().trackingFinalizer()
    .customDeletionTimestamp(): with only a deletion timestamp, getFinishedTime is that
    timestamp (no grace period). What a pod failure policy matches: the ``exit_code`` of
    its container "main", and the True pod ``condition``."""
    annotations: dict[str, str] = {}
    if index is not None:
        annotations[COMPLETION_INDEX_ANNOTATION] = index
    if failure_count is not None:
        annotations[INDEX_FAILURE_COUNT_ANNOTATION] = failure_count
    info = PodInfo(
        name=uid,
        uid=uid,
        phase=phase,
        deleting=deleted_at is not None,
        has_finalizer=finalizer,
        finished_at=deleted_at,
        failure=PodFailureFacts(
            namespace="",
            name=uid,
            container_statuses=(ContainerStatus("main", exit_code),),
            conditions=() if condition is None else (PodCondition(condition, "True"),),
        ),
    )
    return indexed_pod(info, annotations)


#: A podFailurePolicy that fails the index of a pod whose container exited with 3.
FAIL_INDEX_ON_EXIT_3 = PodFailurePolicy(
    rules=(PodFailurePolicyRule(ACTION_FAIL_INDEX, OnExitCodes(OPERATOR_IN, (3,))),)
)
#: A podFailurePolicy that ignores the failure of a pod with condition DisruptionTarget.
IGNORE_DISRUPTION = PodFailurePolicy(
    rules=(
        PodFailurePolicyRule(ACTION_IGNORE, on_pod_conditions=(OnPodConditionsPattern(DISRUPTED),)),
    )
)


def new_job(
    completions: int,
    *,
    completed: str = "",
    failed: str | None = None,
    backoff_limit_per_index: int | None = None,
    replacement: str = POD_REPLACEMENT_TERMINATING_OR_FAILED,
    policy: PodFailurePolicy | None = None,
) -> Job:
    """newJob for an Indexed job: ``completions``, status.completedIndexes
    (``completed``) and status.failedIndexes (``failed``), backoffLimitPerIndex,
    podReplacementPolicy and podFailurePolicy."""
    spec = indexed_spec(
        completions,
        backoff_limit_per_index=backoff_limit_per_index,
        pod_replacement_policy=replacement,
        pod_failure_policy=policy,
    )
    status = JobStatus(completed_indexes=completed, failed_indexes=failed)
    return Job("ns", "job", "uid", spec, status)


# ------------------------------------------------------- TestCalculateSucceededIndexes
@pytest.mark.parametrize(
    ("prev_succeeded", "pods", "completions", "want_status_intervals", "want_intervals"),
    [
        pytest.param("", [("1", S)], 2, (), ((1, 1),), id="one index"),
        pytest.param(
            "",
            [("2", F), ("5", S), ("5", S), ("10", F), ("10", S)],
            11,
            (),
            ((5, 5), (10, 10)),
            id="two separate",
        ),
        pytest.param(
            "",
            [("0", R), ("1", P), ("2", S), ("3", S), ("5", S), ("6", S), ("7", S)],
            8,
            (),
            ((2, 3), (5, 7)),
            id="two intervals",
        ),
        pytest.param(
            "",
            [
                ("0", S),
                ("1", F),
                ("2", S),
                ("3", S),
                ("4", S),
                ("5", S),
                (NO_INDEX, S),
                ("-2", S),
            ],
            6,
            (),
            ((0, 0), (2, 5)),
            id="one index and one interval",
        ),
        pytest.param(
            "",
            [
                ("0", S),
                ("1", S),
                ("2", S),
                ("3", F),
                ("4", S),
                ("5", S),
                (NO_INDEX, S),
                ("-2", S),
            ],
            5,
            (),
            ((0, 2), (4, 4)),
            id="out of range",
        ),
        pytest.param("0-5,8-10", [], 8, ((0, 5),), ((0, 5),), id="prev interval out of range"),
        pytest.param(
            "0-5,8-10",
            [],
            10,
            ((0, 5), (8, 9)),
            ((0, 5), (8, 9)),
            id="prev interval partially out of range",
        ),
        pytest.param(
            "0,4,5,10-12",
            [("2", S), ("7", S), ("8", S)],
            13,
            ((0, 0), (4, 5), (10, 12)),
            ((0, 0), (2, 2), (4, 5), (7, 8), (10, 12)),
            id="prev and new separate",
        ),
        pytest.param(
            "3,4,6",
            [("2", S), ("7", S), ("8", S)],
            9,
            ((3, 4), (6, 6)),
            ((2, 4), (6, 8)),
            id="prev between new",
        ),
        pytest.param(
            "2,7,8",
            [("3", S), ("4", S), ("6", S)],
            9,
            ((2, 2), (7, 8)),
            ((2, 4), (6, 8)),
            id="new between prev",
        ),
        pytest.param(
            "2-7",
            [("0", S), ("3", S), ("5", S), ("9", S)],
            10,
            ((2, 7),),
            ((0, 0), (2, 7), (9, 9)),
            id="new within prev",
        ),
        pytest.param(
            "0,1-foo,bar",
            [("3", S)],
            4,
            ((0, 0),),
            ((0, 0), (3, 3)),
            id="corrupted interval",
        ),
    ],
)
def test_calculate_succeeded_indexes(
    prev_succeeded: str,
    pods: list[tuple[str, str]],
    completions: int,
    want_status_intervals: OrderedIntervals,
    want_intervals: OrderedIntervals,
) -> None:
    """Ports TestCalculateSucceededIndexes (every pod has the tracking finalizer, which
    hollow pods have: PodInfo's default)."""
    job = new_job(completions, completed=prev_succeeded)
    got_status, got = calculate_succeeded_indexes(job, hollows(pods))
    assert got_status == want_status_intervals
    assert got == want_intervals


def test_calculate_succeeded_indexes_skips_counted_pods() -> None:
    """Not upstream: a succeeded pod without the tracking finalizer is already counted."""
    pod = build_pod("a", index="1", phase=S)
    assert calculate_succeeded_indexes(new_job(2), [pod]) == ((), ())


# ------------------------------------------------------------------- TestIsIndexFailed
@pytest.mark.parametrize(
    ("job", "pod", "want"),
    [
        pytest.param(
            new_job(2, backoff_limit_per_index=0),
            build_pod(failure_count="0", phase=F, index="0", finalizer=True),
            True,
            id="failed pod exceeding backoffLimitPerIndex, when backoffLimitPerIndex=0",
        ),
        pytest.param(
            new_job(2, backoff_limit_per_index=1),
            build_pod(failure_count="1", phase=F, index="1", finalizer=True),
            True,
            id="failed pod exceeding backoffLimitPerIndex, when backoffLimitPerIndex=1",
        ),
        # The rule: FailIndex on exit code 3 (In [3]); the pod's container exited with 3.
        pytest.param(
            new_job(2, backoff_limit_per_index=1, policy=FAIL_INDEX_ON_EXIT_3),
            build_pod(failure_count="0", phase=F, index="0", finalizer=True, exit_code=3),
            True,
            id="matching FailIndex pod failure policy",
        ),
        # Not upstream: below the limit, or a failure the policy ignores.
        pytest.param(
            new_job(2, backoff_limit_per_index=1),
            build_pod(failure_count="0", phase=F, index="0", finalizer=True),
            False,
            id="not upstream: failed pod below backoffLimitPerIndex",
        ),
        pytest.param(
            new_job(2, backoff_limit_per_index=0, policy=IGNORE_DISRUPTION),
            build_pod(failure_count="0", phase=F, index="0", finalizer=True, condition=DISRUPTED),
            False,
            id="not upstream: failure ignored by the pod failure policy",
        ),
        pytest.param(
            new_job(2, backoff_limit_per_index=0),
            build_pod(failure_count="0", phase=R, index="0", finalizer=True),
            False,
            id="not upstream: running pod",
        ),
    ],
)
def test_is_index_failed(job: Job, pod: PodInfo, want: bool) -> None:
    """Ports TestIsIndexFailed."""
    assert is_index_failed(job, pod) is want


def test_is_index_failed_deleted_pod_depends_on_replacement_policy() -> None:
    """Not upstream: a deleted running pod fails (isPodFailed) unless only failed pods
    are replaced."""
    pod = build_pod("a", index="0", failure_count="0", phase=R, finalizer=True, deleted_at=T0)
    assert is_index_failed(new_job(1, backoff_limit_per_index=0), pod)
    job = new_job(1, backoff_limit_per_index=0, replacement=POD_REPLACEMENT_FAILED)
    assert not is_index_failed(job, pod)


def test_is_index_failed_needs_backoff_limit_per_index() -> None:
    """Not upstream: upstream dereferences backoffLimitPerIndex (a panic when nil)."""
    pod = build_pod(phase=F, index="0", finalizer=True)
    with pytest.raises(ValueError, match="backoffLimitPerIndex"):
        is_index_failed(new_job(1), pod)


# ------------------------------------------------------------ TestCalculateFailedIndexes
@pytest.mark.parametrize(
    ("job", "pods", "want_failed_indexes"),
    [
        pytest.param(
            new_job(2, backoff_limit_per_index=1),
            [
                build_pod(failure_count="0", phase=F, index="0", finalizer=True),
                build_pod(failure_count="1", phase=F, index="1", finalizer=True),
            ],
            ((1, 1),),
            id="one new index failed",
        ),
        pytest.param(
            new_job(2, backoff_limit_per_index=0),
            [build_pod(failure_count="0", phase=F, index="0")],
            (),
            id="pod without finalizer is ignored",
        ),
        pytest.param(
            new_job(2, backoff_limit_per_index=0),
            [build_pod(failure_count="0", phase=F, index="3")],
            (),
            id="pod outside completions is ignored",
        ),
        pytest.param(
            new_job(2, backoff_limit_per_index=0, failed="0"),
            [build_pod(failure_count="0", phase=F, index="1", finalizer=True)],
            ((0, 1),),
            id="extend the failed indexes",
        ),
        pytest.param(
            new_job(2, backoff_limit_per_index=0, failed=""),
            [build_pod(failure_count="0", phase=F, index="1", finalizer=True)],
            ((1, 1),),
            id="prev failed indexes empty",
        ),
        pytest.param(
            new_job(2, backoff_limit_per_index=0, failed="9"),
            [build_pod(failure_count="0", phase=F, index="1", finalizer=True)],
            ((1, 1),),
            id="prev failed indexes outside the completions",
        ),
    ],
)
def test_calculate_failed_indexes(
    job: Job, pods: list[PodInfo], want_failed_indexes: OrderedIntervals
) -> None:
    """Ports TestCalculateFailedIndexes."""
    assert calculate_failed_indexes(job, pods) == want_failed_indexes


# ---------------------------------------------------- TestGetPodsWithDelayedDeletionPerIndex
@pytest.mark.parametrize(
    ("job", "pods", "expected_rm_finalizers", "want"),
    [
        pytest.param(
            new_job(3, backoff_limit_per_index=1),
            [
                build_pod("a", failure_count="0", phase=F, index="0", finalizer=True),
                build_pod("b", failure_count="1", phase=F, index="1", finalizer=True),
                build_pod("c", failure_count="0", phase=F, index="2", finalizer=True),
            ],
            frozenset(),
            ["a", "c"],
            id="failed pods are kept corresponding to non-failed indexes are kept",
        ),
        pytest.param(
            new_job(2, backoff_limit_per_index=0),
            [build_pod("a", failure_count="0", phase=F, index="0")],
            frozenset(),
            [],
            id="failed pod without finalizer; the pod's deletion is not delayed as it already "
            "started",
        ),
        pytest.param(
            new_job(2, backoff_limit_per_index=0),
            [build_pod("a", failure_count="0", phase=F, index="0", finalizer=True)],
            frozenset({"a"}),
            [],
            id="failed pod with expected finalizer removal; the pod's deletion is not delayed "
            "as it already started",
        ),
        pytest.param(
            new_job(2, backoff_limit_per_index=0),
            [build_pod("a", failure_count="0", phase=F, index="4", finalizer=True)],
            frozenset(),
            [],
            id="failed pod with index outside of completions; the pod's deletion is not delayed",
        ),
        pytest.param(
            new_job(2, backoff_limit_per_index=1),
            [
                build_pod("a1", failure_count="0", phase=F, index="0", finalizer=True),
                build_pod("a2", failure_count="1", phase=R, index="0", finalizer=True),
            ],
            frozenset(),
            [],
            id="failed pod for active index; the pod's deletion is not delayed as it is "
            "already replaced",
        ),
        pytest.param(
            new_job(2, backoff_limit_per_index=1),
            [
                build_pod("a1", failure_count="0", phase=F, index="0", finalizer=True),
                build_pod("a2", failure_count="1", phase=S, index="0", finalizer=True),
            ],
            frozenset(),
            [],
            id="failed pod for succeeded index; the pod's deletion is not delayed as it is "
            "already replaced",
        ),
        pytest.param(
            new_job(2, backoff_limit_per_index=4),
            [
                build_pod("a1", failure_count="0", phase=F, index="0", finalizer=True),
                build_pod("a3", failure_count="2", phase=F, index="0", finalizer=True),
                build_pod("a2", failure_count="1", phase=F, index="0", finalizer=True),
            ],
            frozenset(),
            ["a3"],
            id="multiple failed pods for index with different failure count; only the pod "
            "with highest failure count is kept",
        ),
        pytest.param(
            new_job(2, backoff_limit_per_index=4),
            [
                build_pod(
                    "a1",
                    failure_count="1",
                    phase=F,
                    index="0",
                    deleted_at=T0 - timedelta(seconds=1),
                    finalizer=True,
                ),
                build_pod(
                    "a3", failure_count="1", phase=F, index="0", deleted_at=T0, finalizer=True
                ),
                build_pod(
                    "a2",
                    failure_count="1",
                    phase=F,
                    index="0",
                    deleted_at=T0 - timedelta(seconds=2),
                    finalizer=True,
                ),
            ],
            frozenset(),
            ["a3"],
            id="multiple failed pods for index with different finish times; only the last "
            "failed pod is kept",
        ),
    ],
)
def test_get_pods_with_delayed_deletion_per_index(
    job: Job, pods: list[PodInfo], expected_rm_finalizers: frozenset[str], want: list[str]
) -> None:
    """Ports TestGetPodsWithDelayedDeletionPerIndex, with the same jobCtx: the failed
    and succeeded indexes calculated from the case's pods."""
    failed = calculate_failed_indexes(job, pods)
    _, succeeded = calculate_succeeded_indexes(job, pods)
    got = get_pods_with_delayed_deletion_per_index(
        job, pods, succeeded, failed, expected_rm_finalizers
    )
    assert sorted(p.uid for p in got.values()) == want


def test_pods_with_delayed_deletion_are_keyed_by_index() -> None:
    """Not upstream: the map's keys are the indexes (upstream's test reads only values)."""
    job = new_job(3, backoff_limit_per_index=1)
    pods = [
        build_pod("a", failure_count="0", phase=F, index="0", finalizer=True),
        build_pod("c", failure_count="0", phase=F, index="2", finalizer=True),
    ]
    got = get_pods_with_delayed_deletion_per_index(job, pods, (), ())
    assert {ix: p.uid for ix, p in got.items()} == {0: "a", 2: "c"}


# ------------------------------------------------------- TestGetNewIndexFailureCountValue
@pytest.mark.parametrize(
    ("job", "pod", "want_failures", "want_ignored"),
    [
        pytest.param(new_job(1), None, 0, 0, id="first pod created"),
        pytest.param(
            new_job(1),
            build_pod("a", failure_count="0", phase=F, index="0", finalizer=True),
            1,
            0,
            id="failed pod being replaced with 0 index failure count",
        ),
        pytest.param(
            new_job(1),
            build_pod("a", failure_count="3", phase=F, index="0", finalizer=True),
            4,
            0,
            id="failed pod being replaced with >0 index failure count",
        ),
        # The rule: Ignore on condition DisruptionTarget=True, which the pod has.
        pytest.param(
            new_job(4, policy=IGNORE_DISRUPTION),
            build_pod(
                "a", failure_count="3", phase=F, index="3", finalizer=True, condition=DISRUPTED
            ),
            3,
            1,
            id="failed pod being replaced, matching the ignore rule",
        ),
    ],
)
def test_get_new_index_failure_counts(
    job: Job, pod: PodInfo | None, want_failures: int, want_ignored: int
) -> None:
    """Ports TestGetNewIndexFailureCountValue. Upstream's job has no completions here;
    an Indexed Job needs one, and these functions do not read it."""
    assert get_new_index_failure_counts(job, pod) == (want_failures, want_ignored)


# ---------------------------------------------------------------- TestFirstPendingIndexes
@pytest.mark.parametrize(
    ("cnt", "completions", "active_pods", "succeeded", "failed", "want"),
    [
        pytest.param(5, 3, [], (), None, (0, 1, 2), id="cnt greater than completions"),
        pytest.param(2, 5, [], (), None, (0, 1), id="cnt less than completions"),
        pytest.param(3, 10, [("0", R), ("1", P)], (), None, (2, 3, 4), id="first pods active"),
        pytest.param(
            6, 6, [("6", P)], ((4, 5),), None, (0, 1, 2, 3), id="last pods active or succeeded"
        ),
        pytest.param(
            5,
            20,
            [("3", P), ("5", R), ("8", P), (NO_INDEX, R), ("-3", R)],
            ((2, 4), (9, 9)),
            None,
            (0, 1, 6, 7, 10),
            id="mixed",
        ),
        pytest.param(
            5,
            20,
            [("3", P), ("9", P)],
            ((1, 1), (5, 5), (9, 9)),
            ((2, 2), (6, 7)),
            (0, 4, 8, 10, 11),
            id="with failed indexes",
        ),
        pytest.param(0, 5, [], (), None, (), id="not upstream: nothing to create"),
    ],
)
def test_first_pending_indexes(
    cnt: int,
    completions: int,
    active_pods: list[tuple[str, str]],
    succeeded: OrderedIntervals,
    failed: OrderedIntervals | None,
    want: tuple[int, ...],
) -> None:
    """Ports TestFirstPendingIndexes (upstream's job, newJob(1, 1, 1, Indexed), does not
    replace only failed pods)."""
    got = first_pending_indexes(hollows(active_pods), succeeded, failed, cnt, completions)
    assert got == want


def test_first_pending_indexes_skip_terminating_when_only_failed_are_replaced() -> None:
    """Not upstream: with podReplacementPolicy Failed (or a podFailurePolicy) a
    terminating pod's index is not pending until the pod has failed."""
    terminating = build_pod("t", index="1", phase=R, deleted_at=T0)
    active = [hollow("0", R)]
    assert first_pending_indexes(active, (), None, 2, 4, pods=[terminating]) == (1, 2)
    got = first_pending_indexes(
        active, (), None, 2, 4, pods=[terminating], only_replace_failed=True
    )
    assert got == (2, 3)


# --------------------------------------------------- TestAppendDuplicatedIndexPodsForRemoval
@pytest.mark.parametrize(
    ("pods", "want_rm", "want_left", "completions"),
    [
        pytest.param(
            [(NO_INDEX, P), ("2", P), ("5", R), ("6", R)],
            [(NO_INDEX, P), ("6", R)],
            [("2", P), ("5", R)],
            6,
            id="all unique",
        ),
        pytest.param(
            [("5", P), ("0", R), ("3", P), ("0", R), ("3", R), ("0", P), ("6", R), ("6", P)],
            [("0", P), ("0", R), ("3", P), ("6", R), ("6", P)],
            [("0", R), ("3", R), ("5", P)],
            6,
            id="all with index",
        ),
        pytest.param(
            [(NO_INDEX, P), ("invalid", R), ("-2", R), ("0", P), ("1", P), ("1", P), ("1", R)],
            [(NO_INDEX, P), ("invalid", R), ("-2", R), ("1", P), ("1", P)],
            [("0", P), ("1", R)],
            6,
            id="mixed",
        ),
    ],
)
def test_append_duplicated_index_pods_for_removal(
    pods: list[tuple[str, str]],
    want_rm: list[tuple[str, str]],
    want_left: list[tuple[str, str]],
    completions: int,
) -> None:
    """Ports TestAppendDuplicatedIndexPodsForRemoval."""
    rm, left = append_duplicated_index_pods_for_removal([], [], hollows(pods), completions)
    assert index_phases(rm) == want_rm
    assert index_phases(left) == want_left


def test_append_duplicated_index_pods_for_removal_appends() -> None:
    """Not upstream: the pods found are appended to the given rm and left, and among
    duplicates the one furthest along (scheduled, ready) is kept."""
    given_rm, given_left = hollow("9", R), hollow("8", R)
    scheduled = indexed_pod(
        PodInfo("s", "s", R, node_assigned=True), {COMPLETION_INDEX_ANNOTATION: "0"}
    )
    unscheduled = indexed_pod(PodInfo("u", "u", R), {COMPLETION_INDEX_ANNOTATION: "0"})
    rm, left = append_duplicated_index_pods_for_removal(
        [given_rm], [given_left], [scheduled, unscheduled], 2
    )
    assert rm == (given_rm, unscheduled)
    assert left == (given_left, scheduled)


def test_by_completion_index_puts_unknown_first_and_keeps_order() -> None:
    """Not upstream: byCompletionIndex, unknown (-1) first."""
    pods = hollows([("2", R), (NO_INDEX, R), ("0", R), ("2", P)])
    assert index_phases(by_completion_index(pods)) == [(NO_INDEX, R), ("0", R), ("2", R), ("2", P)]


# ------------------------------------------------------------ TestPodGenerateNameWithIndex
@pytest.mark.parametrize(
    ("job_name", "index", "want"),
    [
        pytest.param("indexed-job", 1, "indexed-job-1-", id="short job name"),
        pytest.param(
            "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooo",
            1,
            "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhh-1-",
            id="job name exceeds MaxGeneneratedNameLength",
        ),
        pytest.param(
            "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhoo",
            1,
            "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhh-1-",
            id="job name with index suffix exceeds MaxGeneratedNameLength",
        ),
        pytest.param("j" * 55, 1, "j" * 55 + "-1-", id="not upstream: exactly 58 characters"),
        pytest.param("j" * 60, 12345, "j" * 51 + "-12345-", id="not upstream: long index"),
    ],
)
def test_pod_generate_name_with_index(job_name: str, index: int, want: str) -> None:
    """Ports TestPodGenerateNameWithIndex."""
    assert pod_generate_name_with_index(job_name, index) == want


# --------------------------------------------------------------- TestGetIndexFailureCount
@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        pytest.param(None, 0, id="no annotation"),
        pytest.param({INDEX_FAILURE_COUNT_ANNOTATION: "2"}, 2, id="valid value"),
        pytest.param(
            {INDEX_FAILURE_COUNT_ANNOTATION: str(MAX_INT32)}, MAX_INT32, id="valid maxint32 value"
        ),
        pytest.param({INDEX_FAILURE_COUNT_ANNOTATION: str(MAX_INT32 + 1)}, 0, id="too large value"),
        pytest.param({INDEX_FAILURE_COUNT_ANNOTATION: "-1"}, 0, id="negative value"),
        pytest.param({INDEX_FAILURE_COUNT_ANNOTATION: "xyz"}, 0, id="invalid int value"),
        # Not upstream: what strconv.Atoi refuses and Python's int() would take.
        pytest.param({INDEX_FAILURE_COUNT_ANNOTATION: " 2"}, 0, id="not upstream: space"),
        pytest.param({INDEX_FAILURE_COUNT_ANNOTATION: "1_0"}, 0, id="not upstream: underscore"),
        pytest.param({INDEX_FAILURE_COUNT_ANNOTATION: "+3"}, 3, id="not upstream: plus sign"),
    ],
)
def test_get_index_failure_count(annotations: dict[str, str] | None, want: int) -> None:
    """Ports TestGetIndexFailureCount."""
    assert get_index_failure_count(annotations, PARALLELJOB.index_failure_count_key) == want
    pod = indexed_pod(PodInfo("p", "p"), annotations)
    assert pod.index_failure_count == want


# ------------------------------------------------------------- not upstream: the rest
@pytest.mark.parametrize(
    ("value", "want"),
    [
        pytest.param(None, None, id="missing"),
        pytest.param("0", 0, id="zero"),
        pytest.param("17", 17, id="positive"),
        pytest.param("-2", None, id="negative"),
        pytest.param("invalid", None, id="invalid"),
        pytest.param("", None, id="empty"),
        pytest.param("+4", 4, id="plus sign, as strconv.Atoi"),
    ],
)
def test_get_completion_index(value: str | None, want: int | None) -> None:
    """getCompletionIndex (upstream tests it through hollow pods' "-2"/"invalid"/noIndex)."""
    annotations = {} if value is None else {COMPLETION_INDEX_ANNOTATION: value}
    assert get_completion_index(annotations, PARALLELJOB.completion_index_key) == want


def test_completion_index_is_read_from_the_annotation_only() -> None:
    """Upstream's getCompletionIndex ignores the label of the same name."""
    body: dict[str, Any] = {
        "metadata": {"name": "p", "uid": "u", "labels": {COMPLETION_INDEX_LABEL: "3"}},
    }
    assert parse_pod(body, PARALLELJOB).completion_index is None


ENV_FROM_LABEL = {
    "name": COMPLETION_INDEX_ENV_NAME,
    "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{COMPLETION_INDEX_LABEL}']"}},
}


def test_env_variable_added_to_every_container() -> None:
    """addCompletionIndexEnvVariables, as checkJobCompletionEnvVariable expects; a
    container that sets JOB_COMPLETION_INDEX itself keeps its own."""
    own = {"name": COMPLETION_INDEX_ENV_NAME, "value": "mine"}
    template: dict[str, Any] = {
        "metadata": {"labels": {"a": "b"}},
        "spec": {
            "initContainers": [{"name": "init"}],
            "containers": [
                {"name": "main", "env": [{"name": "X", "value": "1"}]},
                {"name": "own", "env": [own]},
            ],
        },
    }
    before = copy.deepcopy(template)
    out = add_completion_index_env_variables(template, PARALLELJOB)
    assert template == before
    assert out["spec"]["initContainers"][0]["env"] == [ENV_FROM_LABEL]
    assert out["spec"]["containers"][0]["env"] == [{"name": "X", "value": "1"}, ENV_FROM_LABEL]
    assert out["spec"]["containers"][1]["env"] == [own]


def test_env_variable_from_annotation() -> None:
    """The pre-PodIndexLabel field path (checkJobCompletionEnvVariable with
    podIndexLabelDisabled)."""
    out = add_completion_index_env_variables(
        {"spec": {"containers": [{"name": "m"}]}}, PARALLELJOB, from_label=False
    )
    path = out["spec"]["containers"][0]["env"][0]["valueFrom"]["fieldRef"]["fieldPath"]
    assert path == f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"


def test_annotation_and_label_added_to_a_copy() -> None:
    template: dict[str, Any] = {"spec": {}}
    annotated = add_completion_index_annotation(template, 4, PARALLELJOB)
    labelled = add_completion_index_label(annotated, 4, PARALLELJOB)
    assert template == {"spec": {}}
    assert annotated["metadata"] == {"annotations": {COMPLETION_INDEX_ANNOTATION: "4"}}
    assert labelled["metadata"] == {
        "annotations": {COMPLETION_INDEX_ANNOTATION: "4"},
        "labels": {COMPLETION_INDEX_LABEL: "4"},
    }


@pytest.mark.parametrize(
    ("job", "replaced", "want"),
    [
        pytest.param(new_job(1), None, {INDEX_FAILURE_COUNT_ANNOTATION: "0"}, id="first pod"),
        pytest.param(
            new_job(1),
            build_pod("a", failure_count="2", phase=F, index="0"),
            {INDEX_FAILURE_COUNT_ANNOTATION: "3"},
            id="counted failure",
        ),
        pytest.param(
            new_job(1, policy=IGNORE_DISRUPTION),
            build_pod("a", failure_count="2", phase=F, index="0", condition=DISRUPTED),
            {INDEX_FAILURE_COUNT_ANNOTATION: "2", INDEX_IGNORED_FAILURE_COUNT_ANNOTATION: "1"},
            id="ignored failure",
        ),
    ],
)
def test_index_failure_count_annotation(
    job: Job, replaced: PodInfo | None, want: dict[str, str]
) -> None:
    """addIndexFailureCountAnnotation: the ignored count only when above 0."""
    out = add_index_failure_count_annotation(
        {"metadata": {"annotations": {"k": "v"}}}, job, replaced, PARALLELJOB
    )
    assert out["metadata"]["annotations"] == {"k": "v", **want}


def test_failure_count_wraps_as_int32() -> None:
    """Upstream increments an int32."""
    pod = build_pod("a", failure_count=str(MAX_INT32), phase=F, index="0")
    assert get_new_index_failure_counts(new_job(1), pod) == (-(2**31), 0)


def test_template_for_index() -> None:
    """manageJob's per-index template, as checkIndexedJobPods expects: annotation, label,
    hostname <job>-<index>, generateName <job>-<index>-, and with backoffLimitPerIndex the
    failure count carried on from the index's delayed failed pod."""
    template: dict[str, Any] = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}
    before = copy.deepcopy(template)
    delayed = {2: build_pod("old", failure_count="1", phase=F, index="2")}
    job = replace(new_job(3, backoff_limit_per_index=2), name="pj")
    out, generate_name = template_for_index(template, job, 2, delayed, PARALLELJOB)
    assert template == before
    assert generate_name == "pj-2-"
    assert out["spec"] == {"containers": [], "hostname": pod_hostname("pj", 2)}
    assert out["spec"]["hostname"] == "pj-2"
    assert out["metadata"] == {
        "labels": {"a": "b", COMPLETION_INDEX_LABEL: "2"},
        "annotations": {COMPLETION_INDEX_ANNOTATION: "2", INDEX_FAILURE_COUNT_ANNOTATION: "2"},
    }
    out, _ = template_for_index(template, replace(new_job(3), name="pj"), 0, delayed, PARALLELJOB)
    assert out["metadata"]["annotations"] == {COMPLETION_INDEX_ANNOTATION: "0"}
