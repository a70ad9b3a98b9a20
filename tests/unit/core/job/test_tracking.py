"""Finished-pod tracking with finalizers, case by case as upstream tests it
(job_controller_test.go: TestGetNewFinshedPods, TestTrackJobStatusAndRemoveFinalizers,
its Indexed cases included)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from paralleljob import constants as c
from paralleljob.core.job.indexed import track_succeeded_indexes
from paralleljob.core.job.intervals import parse_indexes_from_string
from paralleljob.core.job.model import (
    INDEXED_COMPLETION,
    POD_REPLACEMENT_FAILED,
    Condition,
    JobSpec,
    JobStatus,
    PodInfo,
    is_pod_failed,
)
from paralleljob.core.job.pod_failure_policy import (
    ACTION_IGNORE,
    OPERATOR_IN,
    ContainerStatus,
    OnExitCodes,
    PodFailureFacts,
    PodFailurePolicy,
    PodFailurePolicyRule,
)
from paralleljob.core.job.tracking import (
    can_remove_finalizer,
    clean_uncounted_pods_without_finalizers,
    new_finished_pods,
    record_finished_pods,
    uids_with_finalizer,
)

S, F, P, R = c.SUCCEEDED, c.FAILED, c.PENDING, c.RUNNING
SUCCESS_CRITERIA_MET = Condition(c.COND_SUCCESS_CRITERIA_MET, "True")
FAILED = Condition(c.COND_FAILED, "True")


def tracked(uid: str, phase: str, *, deleting: bool = False) -> PodInfo:
    """A pod with the tracking finalizer (upstream's buildPod().trackingFinalizer())."""
    return PodInfo(uid, uid, phase, deleting=deleting)


def released(uid: str, phase: str, *, deleting: bool = False) -> PodInfo:
    """A pod whose finalizer is gone (upstream's buildPod() without trackingFinalizer())."""
    return PodInfo(uid, uid, phase, deleting=deleting, has_finalizer=False)


def job_status(succeeded: int, failed: int, s: tuple[str, ...], f: tuple[str, ...]) -> JobStatus:
    return JobStatus(succeeded=succeeded, failed=failed, uncounted_succeeded=s, uncounted_failed=f)


# ----------------------------------------------------------------------------- getNewFinishedPods
@pytest.mark.parametrize(
    ("status", "pods", "expected_removed", "want_succeeded", "want_failed"),
    [
        pytest.param(
            job_status(2, 1, (), ()),
            [
                released("a", S),
                tracked("b", S),
                tracked("c", S),
                released("d", F),
                tracked("e", F),
                released("f", R),
            ],
            frozenset(),
            4,
            2,
            id="some counted",
        ),
        pytest.param(
            job_status(1, 1, ("a", "c"), ("e", "f")),
            [
                released("a", S),
                released("b", S),
                tracked("c", S),
                tracked("d", S),
                released("e", F),
                tracked("f", F),
                tracked("g", F),
            ],
            frozenset(),
            4,
            4,
            id="some uncounted",
        ),
        pytest.param(
            job_status(2, 2, ("a",), ("d",)),
            [
                released("a", S),
                tracked("b", S),
                tracked("c", S),
                released("d", F),
                tracked("e", F),
                tracked("f", F),
                tracked("g", F),
            ],
            frozenset({"b", "f"}),
            4,
            5,
            id="with expected removed finalizers",
        ),
        pytest.param(
            job_status(1, 1, (), ()),
            [
                tracked("a", S, deleting=True),
                tracked("b", F, deleting=True),
                tracked("c", R, deleting=True),
                tracked("d", P, deleting=True),
                released("e", R, deleting=True),
                released("f", P, deleting=True),
            ],
            frozenset(),
            2,
            4,
            id="deleted pods",
        ),
    ],
)
def test_new_finished_pods(
    status: JobStatus,
    pods: list[PodInfo],
    expected_removed: frozenset[str],
    want_succeeded: int,
    want_failed: int,
) -> None:
    new_s, new_f = new_finished_pods(pods, status, expected_removed)
    assert status.succeeded + len(new_s) + len(status.uncounted_succeeded) == want_succeeded
    assert status.failed + len(new_f) + len(status.uncounted_failed) == want_failed


# ----------------------------------------------------------------------------- canRemoveFinalizer
@pytest.mark.parametrize(
    ("pod", "job_deleting", "verdict", "removable"),
    [
        (tracked("a", R), False, None, False),
        (tracked("a", P), False, None, False),
        (tracked("a", S), False, None, True),
        (tracked("a", F), False, None, True),
        (tracked("a", R, deleting=True), False, None, True),
        (tracked("a", R), True, None, True),
        (tracked("a", R), False, FAILED, True),
        (tracked("a", R), False, SUCCESS_CRITERIA_MET, True),
    ],
)
def test_can_remove_finalizer(
    pod: PodInfo, job_deleting: bool, verdict: Condition | None, removable: bool
) -> None:
    assert can_remove_finalizer(pod, job_deleting=job_deleting, verdict=verdict) is removable


def test_the_last_failed_pod_of_an_index_keeps_its_finalizer_until_replaced() -> None:
    """canRemoveFinalizer with backoffLimitPerIndex: the pod in
    podsWithDelayedDeletionPerIndex for its index (same UID) stays, unless the job is
    deleted or has a verdict; another failed pod of the index goes."""
    kept = replace(tracked("a", F), completion_index=0)
    other = replace(tracked("b", F), completion_index=0)
    delayed = {0: kept}
    assert not can_remove_finalizer(kept, job_deleting=False, verdict=None, delayed=delayed)
    assert can_remove_finalizer(other, job_deleting=False, verdict=None, delayed=delayed)
    assert can_remove_finalizer(kept, job_deleting=True, verdict=None, delayed=delayed)
    assert can_remove_finalizer(kept, job_deleting=False, verdict=FAILED, delayed=delayed)
    assert can_remove_finalizer(kept, job_deleting=False, verdict=None, delayed={})


def test_a_failure_the_pod_failure_policy_ignores_is_released_not_counted() -> None:
    """countFailed false: no UID in uncountedTerminatedPods.failed, the finalizer goes,
    and the pod still starts the back-off (upstream's newFailedPods)."""
    policy = PodFailurePolicy(
        rules=(PodFailurePolicyRule(ACTION_IGNORE, OnExitCodes(OPERATOR_IN, (42,))),)
    )
    spec = JobSpec(pod_failure_policy=policy, pod_replacement_policy=POD_REPLACEMENT_FAILED)
    ignored = replace(
        tracked("i", F),
        failure=PodFailureFacts("ns", "i", container_statuses=(ContainerStatus("c", 42),)),
    )
    pods = [ignored, tracked("f", F)]
    recorded = record_finished_pods(
        pods, JobStatus(), frozenset(), None, job_deleting=False, max_uncounted=500, spec=spec
    )
    assert recorded.uncounted_failed == ("f",)
    assert [p.uid for p in recorded.remove_finalizers] == ["i", "f"]
    assert [p.uid for p in recorded.newly_failed] == ["i", "f"]


# ------------------------------------------------------------ trackJobStatusAndRemoveFinalizers
@dataclass(frozen=True)
class TrackCase:
    pods: tuple[PodInfo, ...]
    want_removed: int
    #: The status written before finalizers are removed, then after (all removed).
    want_write_1: JobStatus
    want_write_2: JobStatus
    status: JobStatus = field(default_factory=JobStatus)
    verdict: Condition | None = None
    expected_removed: frozenset[str] = frozenset()
    job_deleting: bool = False


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(TrackCase((), 0, JobStatus(), JobStatus()), id="no updates"),
        pytest.param(
            TrackCase(
                (
                    tracked("a", S),
                    tracked("b", F),
                    tracked("c", S, deleting=True),
                    tracked("d", F, deleting=True),
                    tracked("e", P, deleting=True),
                    tracked("p", P),
                    tracked("r", R),
                ),
                5,
                job_status(0, 0, ("a", "c"), ("b", "d", "e")),
                job_status(2, 3, (), ()),
            ),
            id="track finished pods",
        ),
        pytest.param(
            TrackCase(
                (
                    released("e", S),
                    released("x", F),
                    released("y", P),
                    tracked("a", S),
                    tracked("b", F),
                    tracked("c", S),
                    tracked("d", F),
                ),
                4,
                job_status(3, 4, ("a", "c"), ("b", "d")),
                job_status(5, 6, (), ()),
                status=job_status(2, 3, ("a", "e"), ("b", "f")),
            ),
            id="past and new finished pods",
        ),
        pytest.param(
            TrackCase(
                (
                    tracked("a", S),
                    tracked("b", F),
                    tracked("c", S),
                    tracked("d", F),
                    tracked("e", S),
                    tracked("f", F),
                    tracked("g", S),
                    tracked("h", F),
                ),
                4,
                job_status(3, 4, ("a", "e"), ("b", "f")),
                job_status(5, 6, (), ()),
                status=job_status(2, 3, ("a", "g"), ("b", "h")),
                expected_removed=frozenset({"c", "d", "g", "h"}),
            ),
            id="expecting removed finalizers",
        ),
        pytest.param(
            TrackCase(
                (tracked("a", S), tracked("b", F), tracked("c", P)),
                3,
                job_status(0, 0, ("a",), ("b",)),
                job_status(1, 1, (), ()),
                verdict=SUCCESS_CRITERIA_MET,
            ),
            id="succeeding job by JobSuccessPolicy",
        ),
        pytest.param(
            TrackCase(
                (tracked("a", S), tracked("b", F), tracked("c", R)),
                3,
                job_status(0, 0, ("a",), ("b", "c")),
                job_status(1, 2, (), ()),
                verdict=FAILED,
            ),
            id="failing job",
        ),
        pytest.param(
            TrackCase(
                (tracked("a", S), tracked("b", F), tracked("r", R)),
                3,
                job_status(0, 0, ("a",), ("b",)),
                job_status(1, 1, (), ()),
                job_deleting=True,
            ),
            id="deleted job",
        ),
        pytest.param(
            TrackCase(
                (*(tracked(str(i), S) for i in range(500)), tracked("b", F)),
                499,
                job_status(0, 1, tuple(str(i) for i in range(499)), ("b",)),
                job_status(499, 1, (), ("b",)),
                status=job_status(0, 0, (), ("a", "b")),
            ),
            id="too many finished",
        ),
    ],
)
def test_track_job_status_and_remove_finalizers(case: TrackCase) -> None:
    """The finalizers removed and the two status writes, every removal succeeding, with
    these functions in the order the core calls them around the API calls."""
    with_finalizer = uids_with_finalizer(case.pods, case.expected_removed)
    status = clean_uncounted_pods_without_finalizers(case.status, with_finalizer)
    recorded = record_finished_pods(
        case.pods,
        status,
        case.expected_removed,
        case.verdict,
        job_deleting=case.job_deleting,
        max_uncounted=500,
    )
    write_1 = replace(
        status,
        uncounted_succeeded=recorded.uncounted_succeeded,
        uncounted_failed=recorded.uncounted_failed,
    )
    removed = {p.uid for p in recorded.remove_finalizers}
    write_2 = clean_uncounted_pods_without_finalizers(write_1, with_finalizer - removed)
    assert len(removed) == case.want_removed
    assert write_1 == case.want_write_1
    assert write_2 == case.want_write_2


def test_reaching_max_uncounted_stops_the_loop_and_says_so() -> None:
    pods = [tracked(str(i), S) for i in range(3)]
    recorded = record_finished_pods(
        pods, JobStatus(), frozenset(), None, job_deleting=False, max_uncounted=2
    )
    assert recorded.reached_max_uncounted
    assert [p.uid for p in recorded.remove_finalizers] == ["0", "1"]
    assert [p.uid for p in recorded.newly_succeeded] == ["0", "1"]


def test_only_pods_that_finished_on_their_own_enter_the_back_off_record() -> None:
    # Running pods of a failed job count as failed, but did not fail themselves.
    pods = [tracked("f", F), tracked("r", R)]
    recorded = record_finished_pods(
        pods, JobStatus(), frozenset(), FAILED, job_deleting=False, max_uncounted=500
    )
    assert recorded.uncounted_failed == ("f", "r")
    assert [p.uid for p in recorded.newly_failed] == ["f"]


# ------------------------------------------- trackJobStatusAndRemoveFinalizers, Indexed jobs
def indexed_pod(uid: str, phase: str, index: int | None, *, finalizer: bool = True) -> PodInfo:
    """buildPod().uid().phase().index() (with .trackingFinalizer() unless told)."""
    return PodInfo(uid, uid, phase, has_finalizer=finalizer, completion_index=index)


@dataclass(frozen=True)
class IndexedTrackCase:
    completions: int
    pods: tuple[PodInfo, ...]
    want_removed: int
    want_write_1: JobStatus
    #: None: upstream made one status update (nothing was left to count after it).
    want_write_2: JobStatus | None = None
    status: JobStatus = field(default_factory=JobStatus)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            IndexedTrackCase(
                6,
                (
                    indexed_pod("s1", S, 1),
                    indexed_pod("s3", S, 3),
                    indexed_pod("s3b", S, 3),
                    indexed_pod("r5", R, 5),
                    indexed_pod("s", S, None),
                ),
                4,
                JobStatus(active=1, succeeded=2, completed_indexes="1,3"),
                status=JobStatus(active=1),
            ),
            id="indexed job new successful pods",
        ),
        pytest.param(
            IndexedTrackCase(
                2,
                (indexed_pod("r0", R, 0), indexed_pod("r1", R, 1)),
                0,
                JobStatus(active=2, succeeded=0, completed_indexes=""),
                status=JobStatus(active=2, succeeded=1, completed_indexes="3"),
            ),
            id="indexed job prev successful pods outside current completions index range "
            "with no new succeeded pods",
        ),
        pytest.param(
            IndexedTrackCase(
                2,
                (indexed_pod("r0", R, 0), indexed_pod("s1", S, 1)),
                1,
                JobStatus(active=2, succeeded=1, completed_indexes="1"),
                status=JobStatus(active=2, succeeded=1, completed_indexes="3"),
            ),
            id="indexed job prev successful pods outside current completions index range "
            "with new succeeded pods in range",
        ),
        pytest.param(
            IndexedTrackCase(
                6,
                (
                    indexed_pod("a", F, 1),
                    indexed_pod("b", F, 3),
                    indexed_pod("c", F, 3),
                    indexed_pod("d", R, 5),
                    indexed_pod("e", F, None),
                ),
                4,
                JobStatus(active=1, uncounted_failed=("a", "b", "c")),
                JobStatus(active=1, failed=3),
                status=JobStatus(active=1),
            ),
            id="indexed job new failed pods",
        ),
        pytest.param(
            IndexedTrackCase(
                7,
                (
                    indexed_pod("s0", S, 0, finalizer=False),
                    indexed_pod("f1", F, 1, finalizer=False),
                    indexed_pod("s1", S, 1),
                    indexed_pod("s3", S, 3),
                    indexed_pod("a", F, 2),
                    indexed_pod("b", F, 5),
                ),
                4,
                JobStatus(
                    succeeded=6, failed=2, completed_indexes="0-4,6", uncounted_failed=("a", "b")
                ),
                JobStatus(succeeded=6, failed=4, completed_indexes="0-4,6"),
                status=JobStatus(failed=2, succeeded=5, completed_indexes="0-2,4,6,7"),
            ),
            id="indexed job past and new pods",
        ),
        pytest.param(
            IndexedTrackCase(
                501,
                tuple(indexed_pod(str(i), S, i) for i in range(501)),
                500,
                JobStatus(succeeded=500, completed_indexes="0-499"),
            ),
            id="too many indexed finished",
        ),
    ],
)
def test_track_indexed_job_status_and_remove_finalizers(case: IndexedTrackCase) -> None:
    """TestTrackJobStatusAndRemoveFinalizers' Indexed cases. As upstream's test sets
    them, the succeeded indexes are status.completedIndexes and the previous ones are
    none (a real sync adds the succeeded pods to the former and passes the stored ones as
    the latter)."""
    spec = JobSpec(completions=case.completions, completion_mode=INDEXED_COMPLETION)
    with_finalizer = uids_with_finalizer(case.pods, frozenset())
    status = clean_uncounted_pods_without_finalizers(case.status, with_finalizer)
    recorded = record_finished_pods(
        case.pods,
        status,
        frozenset(),
        None,
        job_deleting=False,
        max_uncounted=500,
        spec=spec,
        prev_succeeded_indexes=(),
    )
    write_1 = replace(
        status,
        uncounted_succeeded=recorded.uncounted_succeeded,
        uncounted_failed=recorded.uncounted_failed,
    )
    succeeded = parse_indexes_from_string(case.status.completed_indexes, case.completions)
    write_1 = track_succeeded_indexes(spec, write_1, succeeded, recorded.new_succeeded_indexes)
    removed = {p.uid for p in recorded.remove_finalizers}
    write_2 = clean_uncounted_pods_without_finalizers(write_1, with_finalizer - removed)
    assert len(removed) == case.want_removed
    assert write_1 == case.want_write_1
    assert write_2 == (case.want_write_2 or case.want_write_1)


def test_a_succeeded_index_already_recorded_is_not_recorded_again() -> None:
    """A crash between status write 1 and the finalizer removal: the index is in
    completedIndexes (prevSucceededIndexes); its pod's finalizer goes, uncounted."""
    spec = JobSpec(completions=3, completion_mode=INDEXED_COMPLETION)
    recorded = record_finished_pods(
        [indexed_pod("s1", S, 1), indexed_pod("s2", S, 2)],
        JobStatus(succeeded=1, completed_indexes="1"),
        frozenset(),
        None,
        job_deleting=False,
        max_uncounted=500,
        spec=spec,
        prev_succeeded_indexes=((1, 1),),
    )
    assert recorded.new_succeeded_indexes == (2,)
    assert [p.uid for p in recorded.remove_finalizers] == ["s1", "s2"]
    assert [p.uid for p in recorded.newly_succeeded] == ["s2"]


def test_an_indexed_job_s_pods_are_recorded_in_index_order() -> None:
    spec = JobSpec(completions=4, completion_mode=INDEXED_COMPLETION)
    pods = [indexed_pod(u, F, ix) for u, ix in (("c", 3), ("a", 0), ("none", None), ("b", 2))]
    recorded = record_finished_pods(
        pods, JobStatus(), frozenset(), None, job_deleting=False, max_uncounted=500, spec=spec
    )
    assert recorded.uncounted_failed == ("a", "b", "c")
    assert [p.uid for p in recorded.remove_finalizers] == ["none", "a", "b", "c"]


def test_new_finished_pods_of_an_indexed_job_need_a_valid_index() -> None:
    """getNewFinishedPods through getValidPodsWithFilter."""
    spec = JobSpec(completions=2, completion_mode=INDEXED_COMPLETION)
    pods = [
        indexed_pod("s0", S, 0),
        indexed_pod("s5", S, 5),
        indexed_pod("f1", F, 1),
        indexed_pod("f", F, None),
    ]
    new_s, new_f = new_finished_pods(pods, JobStatus(), frozenset(), spec)
    assert ([p.uid for p in new_s], [p.uid for p in new_f]) == (["s0"], ["f1"])


# ------------------------------------------------------------------ podReplacementPolicy
FAILED_POLICY = JobSpec(pod_replacement_policy=POD_REPLACEMENT_FAILED)


def test_a_terminating_pod_is_not_failed_while_only_failed_pods_are_replaced() -> None:
    """isPodFailed with onlyReplaceFailedPods: "WQ job: recreate pods when failed"."""
    pods = [tracked("f", F), tracked("t", R, deleting=True), tracked("r", R)]
    _, new_f = new_finished_pods(pods, JobStatus(), frozenset(), FAILED_POLICY)
    assert [p.uid for p in new_f] == ["f"]
    recorded = record_finished_pods(
        pods,
        JobStatus(),
        frozenset(),
        None,
        job_deleting=False,
        max_uncounted=500,
        spec=FAILED_POLICY,
    )
    assert recorded.uncounted_failed == ("f",)
    assert [p.uid for p in recorded.remove_finalizers] == ["f"]
    _, plain_f = new_finished_pods(pods, JobStatus(), frozenset())
    assert [p.uid for p in plain_f] == ["f", "t"]


@pytest.mark.parametrize(
    ("pod", "only_replace_failed", "removable"),
    [
        (tracked("t", R, deleting=True), False, True),
        (tracked("t", R, deleting=True), True, False),
        (tracked("t", F, deleting=True), True, True),
        (tracked("s", S, deleting=True), True, True),
    ],
)
def test_can_remove_finalizer_with_only_failed_pods_replaced(
    pod: PodInfo, only_replace_failed: bool, removable: bool
) -> None:
    failed = is_pod_failed(pod, only_replace_failed=only_replace_failed)
    assert can_remove_finalizer(pod, job_deleting=False, verdict=None, consider_failed=failed) is (
        removable
    )
