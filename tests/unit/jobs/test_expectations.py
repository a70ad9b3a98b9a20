"""Expectations (expectations.py): what a job's loop did that its pod cache does not show yet."""

from __future__ import annotations

import pytest

from paralleljob import constants as c
from paralleljob.core.job.model import PodInfo
from paralleljob.jobs.expectations import EXPECTATIONS_TIMEOUT, UIDTrackingExpectations

NEW = PodInfo("n", "new")
OLD = PodInfo("o", "old")
DONE = PodInfo("d", "done", c.SUCCEEDED, has_finalizer=True)


def _expecting() -> UIDTrackingExpectations:
    """A pod created ("new"), one deleted ("old"), one released ("done"), all at 0 s."""
    exp = UIDTrackingExpectations()
    exp.expect_creation("new", 0.0)
    exp.expect_deletion("old", 0.0)
    exp.expect_finalizer_removed("done", 0.0)
    return exp


def test_expectations_hold_back_until_the_cache_shows_the_pods() -> None:
    exp = _expecting()
    pods = {"old": OLD, "done": DONE}
    assert not exp.satisfied(pods, now=1.0)
    assert exp.expected_removed_finalizers(pods, now=1.0) == frozenset({"done"})
    settled = {"new": NEW, "old": PodInfo("o", "old", deleting=True)}
    assert exp.satisfied(settled, now=2.0)
    assert exp.expected_removed_finalizers(settled, now=2.0) == frozenset()


@pytest.mark.parametrize(
    ("pod", "settles"),
    [
        pytest.param(None, True, id="gone"),
        pytest.param(PodInfo("d", "done", c.SUCCEEDED, has_finalizer=False), True, id="released"),
        pytest.param(DONE, False, id="still shown with its finalizer"),
    ],
)
def test_a_finalizer_removal_is_settled_by_a_pod_without_it_or_gone(
    pod: PodInfo | None, settles: bool
) -> None:
    exp = UIDTrackingExpectations()
    exp.expect_finalizer_removed("done", 0.0)
    pods = {} if pod is None else {"done": pod}
    assert exp.expected_removed_finalizers(pods, now=1.0) == (
        frozenset() if settles else frozenset({"done"})
    )
    assert exp.satisfied(pods, now=1.0), "finalizer removals never hold back pod changes"


def test_expectations_time_out_after_five_minutes() -> None:
    exp = UIDTrackingExpectations()
    exp.expect_creation("lost", 0.0)
    assert not exp.satisfied({}, now=EXPECTATIONS_TIMEOUT)
    assert exp.satisfied({}, now=EXPECTATIONS_TIMEOUT + 1)


def test_a_finalizer_removal_never_expires_while_its_pod_shows_the_finalizer() -> None:
    """Upstream's uidTrackingExpectations have no timeout: a watch slower than five
    minutes must not make a released, counted pod look uncounted (counted twice)."""
    exp = UIDTrackingExpectations()
    exp.expect_finalizer_removed("done", 0.0)
    later = 10 * EXPECTATIONS_TIMEOUT
    assert exp.expected_removed_finalizers({"done": DONE}, now=later) == frozenset({"done"})
    assert exp.unobserved_since({"done": DONE}, now=later) == 0.0
    assert exp.expected_removed_finalizers({}, now=later) == frozenset(), "gone: settled"


def test_a_creation_is_expected_from_its_first_call() -> None:
    exp = UIDTrackingExpectations()
    exp.expect_creation("new", 0.0)
    exp.expect_creation("new", 100.0)
    assert exp.unobserved_since({}, now=100.0) == 0.0


def test_watch_events_settle_expectations() -> None:
    exp = _expecting()
    exp.expect_deletion("new", 0.0)
    exp.observe_pod("new", gone=False, deleting=False, has_finalizer=True)
    assert exp.unobserved_since({"new": NEW, "old": OLD, "done": DONE}, now=1.0) == 0.0
    assert not exp.satisfied({"new": NEW, "old": OLD, "done": DONE}, now=1.0), (
        "a pod shown is created, not yet deleted"
    )
    exp.observe_pod("new", gone=True, deleting=False, has_finalizer=True)
    exp.observe_pod("old", gone=False, deleting=True, has_finalizer=True)
    exp.observe_pod("done", gone=False, deleting=False, has_finalizer=False)
    cache = {"new": NEW, "old": OLD, "done": DONE}  # the cache lags the events
    assert exp.satisfied(cache, now=1.0)
    assert exp.expected_removed_finalizers(cache, now=1.0) == frozenset()


def test_the_liveness_view_is_the_oldest_unsettled_expectation_and_changes_nothing() -> None:
    exp = UIDTrackingExpectations()
    exp.expect_creation("new", 10.0)
    exp.expect_deletion("old", 20.0)
    exp.expect_finalizer_removed("gone", 5.0)  # released, then deleted: settled
    assert exp.unobserved_since({"old": OLD}, now=30.0) == 10.0
    assert exp.unobserved_since({"new": NEW, "old": OLD}, now=30.0) == 20.0
    settled = {"new": NEW, "old": PodInfo("o", "old", deleting=True)}
    assert exp.unobserved_since(settled, now=30.0) is None
    assert exp.unobserved_since({}, now=10.0 + EXPECTATIONS_TIMEOUT + 1) is None
    assert not exp.satisfied({"old": OLD}, now=30.0), "looking forgot nothing"
