"""Bounded pauses of the cyclic GC while the operator's memory grows.

A full collection scans every tracked object not frozen, and holds the one event loop
while it does: over the projections and records of tens of thousands of pods and jobs,
built as they were created (not at a startup, which caches.py freezes), a running
operator paused 1-2.5 s at 5,000 and 10,000 running jobs x 5 pods (scenario 8,
bench/results/2026-12-02-s8-operator-warm.md). Right after a full collection, what is
left is live: frozen then, none of it is scanned again, so each full collection scans
only what was built since the last one. What is frozen and becomes cyclic garbage later
is never freed (refcounting still frees the rest): hence only after a collection that
was long, not after each.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

from . import metrics

#: A full collection at least this long (seconds) freezes what it left.
LONG_COLLECTION = 0.05


class FreezeAfterLongCollections:
    """A ``gc.callbacks`` entry: each full collection's duration goes to ``observe``, and
    the part of it the operator's own computing took (its thread's wait for a CPU
    excepted, ``times``) to ``observe_blocked``; after one that took ``longest`` seconds
    or more, the survivors are frozen (``schedule`` is handed ``freeze`` to do so once
    the collection has returned: e.g. the event loop's ``call_soon_threadsafe``)."""

    def __init__(
        self,
        schedule: Callable[[Callable[[], None]], Any],
        longest: float = LONG_COLLECTION,
        clock: Callable[[], float] = time.perf_counter,
        freeze: Callable[[], None] = gc.freeze,
        observe: Callable[[float], None] = metrics.FULL_COLLECTIONS.observe,
        times: Callable[[], metrics.ThreadTimes | None] = metrics.thread_times,
        observe_blocked: Callable[[float], None] = metrics.FULL_COLLECTIONS_BLOCKED.observe,
    ) -> None:
        self._schedule = schedule
        self._longest = longest
        self._clock = clock
        self._freeze = freeze
        self._observe = observe
        self._times = times
        self._observe_blocked = observe_blocked
        self._started: tuple[float, metrics.ThreadTimes | None] | None = None

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = (self._clock(), self._times())
            return
        started, self._started = self._started, None
        if started is None:
            return
        took = self._clock() - started[0]
        self._observe(took)
        self._observe_blocked(metrics.own_part_of_lag(took, started[1], self._times()))
        if took >= self._longest:
            self._schedule(self._freeze)


def bound_full_collections(
    schedule: Callable[[Callable[[], None]], Any],
) -> Callable[[], None]:
    """Installs the callback for this process (Caches.open, on its event loop); returns
    what removes it again (Caches.close: a collection after the loop has closed must not
    schedule on it)."""
    callback = FreezeAfterLongCollections(schedule)
    gc.callbacks.append(callback)
    return lambda: gc.callbacks.remove(callback)
