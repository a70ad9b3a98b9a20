"""Expectations: the pod changes a job's loop made that its pod cache does not show yet.

A sync acts on the pod cache (the pod informer's, pod_cache.py), which lags the API calls
the loop made.
Without expectations a sync right after creating pods would not see them and create
them again, and a pod whose tracking finalizer was just removed would look as if it
still had it. Upstream keeps two such records (``pkg/controller``):
``ControllerExpectations`` counts creations and deletions per job and holds manageJob
back until the informer has seen them all (or 5 minutes passed), and the job
controller's ``uidTrackingExpectations`` (tracking_utils.go) remembers the pods whose
finalizer removal is not observed yet. :class:`UIDTrackingExpectations` is both,
by pod UID, for one job. As upstream's, a finalizer removal never expires while its pod
is cached with the finalizer: forgotten after a timeout, a slow watch would show the
finished pod as not yet counted, and it would be counted twice (issue 34).

Pure: the caller passes the time (monotonic seconds) and the cache's pods.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core import PodInfo

#: upstream ExpectationsTimeout: forget unobserved creations/deletions after 5 minutes
#: (a pod lost to the cache must not hold its job back for ever; one created too many is
#: deleted again). Finalizer removals have no timeout.
EXPECTATIONS_TIMEOUT = 300.0

#: Pod UID -> when the API call that the cache has yet to show succeeded.
Pending = dict[str, float]


class UIDTrackingExpectations:
    """One job's pending creations, deletions and finalizer removals, by pod UID."""

    def __init__(self) -> None:
        self._creates: Pending = {}
        self._deletes: Pending = {}
        self._finalizer_removals: Pending = {}

    # -- the loop's API calls succeeded ------------------------------------------------
    def expect_creation(self, uid: str, now: float) -> None:
        """ExpectCreations, for the pod a create call returned."""
        self._creates.setdefault(uid, now)

    def expect_deletion(self, uid: str, now: float) -> None:
        """ExpectDeletions, for the pod a delete call deleted."""
        self._deletes[uid] = now

    def expect_finalizer_removed(self, uid: str, now: float) -> None:
        """expectFinalizersRemoved, for the pod a finalizer patch released."""
        self._finalizer_removals[uid] = now

    # -- the pod watch -----------------------------------------------------------------
    def observe_pod(self, uid: str, *, gone: bool, deleting: bool, has_finalizer: bool) -> None:
        """A pod watch event: CreationObserved, DeletionObserved and
        finalizerRemovalObserved, for whichever of them the event shows."""
        self._creates.pop(uid, None)
        if gone or deleting:
            self._deletes.pop(uid, None)
        if gone or not has_finalizer:
            self._finalizer_removals.pop(uid, None)

    # -- a sync ------------------------------------------------------------------------
    def satisfied(self, pods: Mapping[str, PodInfo], now: float) -> bool:
        """SatisfiedExpectations: every pod created or deleted is in the cache (``pods``,
        by UID) as such, or was waited for longer than EXPECTATIONS_TIMEOUT."""
        self._forget_settled(pods, now)
        return not self._creates and not self._deletes

    def expected_removed_finalizers(
        self, pods: Mapping[str, PodInfo], now: float
    ) -> frozenset[str]:
        """getExpectedUIDs: the pods whose finalizer is gone although the cache still
        shows it."""
        self._forget_settled(pods, now)
        return frozenset(self._finalizer_removals)

    # -- the liveness probe ------------------------------------------------------------
    def oldest(self) -> float | None:
        """When the oldest pod change still expected was made (the cache may settle it
        already; None: none expected)."""
        groups = (self._creates, self._deletes, self._finalizer_removals)
        return min((t for group in groups for t in group.values()), default=None)

    def unobserved_since(self, pods: Mapping[str, PodInfo], now: float) -> float | None:
        """When the oldest expectation the cache does not settle was made (changes
        nothing: the probe only looks)."""
        pending = [t for group in self._unsettled(pods, now) for t in group.values()]
        return min(pending, default=None)

    def _forget_settled(self, pods: Mapping[str, PodInfo], now: float) -> None:
        self._creates, self._deletes, self._finalizer_removals = self._unsettled(pods, now)

    def _unsettled(
        self, pods: Mapping[str, PodInfo], now: float
    ) -> tuple[Pending, Pending, Pending]:
        """The creations and deletions that the cache does not settle yet and that have
        not timed out, and the finalizer removals it does not settle yet."""

        def live(since: float) -> bool:
            return now - since <= EXPECTATIONS_TIMEOUT

        creates = {u: t for u, t in self._creates.items() if u not in pods and live(t)}
        deletes = {
            u: t
            for u, t in self._deletes.items()
            if (p := pods.get(u)) is not None and not p.deleting and live(t)
        }
        removals = {
            u: t
            for u, t in self._finalizer_removals.items()
            if (p := pods.get(u)) is not None and p.has_finalizer
        }
        return creates, deletes, removals
