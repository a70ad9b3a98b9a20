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

Freezing bounds what a full collection scans to what survived since the last one, and
Python runs one after ten collections of the middle generation (its third threshold):
growing 10,000 jobs x 5 pods at once, that was some 40,000 new objects each time, about
55 ms of the operator's own time and up to 86 ms on a busy machine (bench.scale --grow
10000). So the third threshold follows the full collections' own time: fewer middle
collections per full one while they take longer than ``TARGET``, one more each time one
takes under half of it, up to Python's default again once the growth is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from typing import Any

from . import metrics

#: The own time (seconds) a full collection should take at most: a quarter of the
#: 100 ms pause budget, leaving room for a machine that makes it slower.
TARGET = 0.025
#: A full collection at least this long (seconds) freezes what it left.
LONG_COLLECTION = TARGET
#: Python's third threshold: middle-generation collections per full one.
DEFAULT_FULL_EVERY = 10
#: How often a startup freezes what it has built (seconds), and for how long at most
#: (a controller that never catches up with the listing must not freeze for good what
#: later collections would free).
FREEZE_EVERY = 1.0
FREEZE_FOR_AT_MOST = 600.0


def next_full_every(current: int, own: float, target: float = TARGET) -> int:
    """The third GC threshold after a full collection that took ``own`` seconds of the
    operator's time: down in proportion when over ``target``, up by one when under half
    of it (a growth slows down gradually), within 1..``DEFAULT_FULL_EVERY``."""
    if own > target:
        return max(1, min(current - 1, int(current * target / own)))
    if own < target / 2:
        return min(DEFAULT_FULL_EVERY, current + 1)
    return current


class FreezeAfterLongCollections:
    """A ``gc.callbacks`` entry: each full collection's duration goes to ``observe``, and
    the part of it the operator's own computing took (its thread's wait for a CPU
    excepted, ``times``) to ``observe_blocked``; after one that took ``longest`` seconds
    or more, the survivors are frozen (``schedule`` is handed ``freeze`` to do so once
    the collection has returned: e.g. the event loop's ``call_soon_threadsafe``); and the
    third threshold follows each one's own time (``next_full_every``)."""

    def __init__(
        self,
        schedule: Callable[[Callable[[], None]], Any],
        longest: float = LONG_COLLECTION,
        clock: Callable[[], float] = time.perf_counter,
        freeze: Callable[[], None] = gc.freeze,
        observe: Callable[[float], None] = metrics.FULL_COLLECTIONS.observe,
        times: Callable[[], metrics.ThreadTimes | None] = metrics.thread_times,
        observe_blocked: Callable[[float], None] = metrics.FULL_COLLECTIONS_BLOCKED.observe,
        thresholds: Callable[[], tuple[int, int, int]] = gc.get_threshold,
        set_thresholds: Callable[[int, int, int], None] = gc.set_threshold,
    ) -> None:
        self._schedule = schedule
        self._longest = longest
        self._clock = clock
        self._freeze = freeze
        self._observe = observe
        self._times = times
        self._observe_blocked = observe_blocked
        self._thresholds = thresholds
        self._set_thresholds = set_thresholds
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
        own = metrics.own_part_of_lag(took, started[1], self._times())
        self._observe(took)
        self._observe_blocked(own)
        if took >= self._longest:
            self._schedule(self._freeze)
        young, middle, full_every = self._thresholds()
        self._set_thresholds(young, middle, next_full_every(full_every, own))


def bound_full_collections(
    schedule: Callable[[Callable[[], None]], Any],
) -> Callable[[], None]:
    """Installs the callback for this process (Caches.open, on its event loop); returns
    what removes it again and restores the thresholds (Caches.close: a collection after
    the loop has closed must not schedule on it)."""
    callback = FreezeAfterLongCollections(schedule)
    thresholds = gc.get_threshold()
    gc.callbacks.append(callback)

    def remove() -> None:
        gc.callbacks.remove(callback)
        gc.set_threshold(*thresholds)

    return remove


class AutomaticCollections:
    """The collector's own (allocation-counted) collections, off while any listing is
    being frozen (``off`` nests: on again when the last one ends)."""

    def __init__(self) -> None:
        self._holders = 0

    @contextlib.contextmanager
    def off(self) -> Iterator[None]:
        self._holders += 1
        gc.disable()
        try:
            yield
        finally:
            self._holders -= 1
            if not self._holders:
                gc.enable()


AUTOMATIC = AutomaticCollections()


async def freeze_until_quiet(busy: Callable[[], bool], every: float = FREEZE_EVERY) -> None:
    """Freezes every second until a listing is over (``busy`` is false) and two looks
    found it so. What a listing builds (a projection per pod, a record per job) lives as
    long as its object, and a full collection scans every tracked object not frozen:
    over 50,000 pods and 10,000 jobs one held the loop for 0.2-0.5 s, several times a
    second (the freeze of what was imported, cli.py, leaves the GC's growth heuristic
    little to compare against). Frozen within a second of being built, each is scanned
    by no later collection.

    Meanwhile the collector's own collections are off: the young generations are
    collected here each second anyway (what a second left as cyclic garbage is freed),
    and between two of these the collector scanned the same young objects again and
    again as the decoded pages came in (a quarter of a restart's CPU at 20,000 jobs x 5
    pods: 47.9 -> 36.1 s until every job was synced, bench.scale)."""
    quiet, looks = 0, int(FREEZE_FOR_AT_MOST / every)
    with AUTOMATIC.off():
        while quiet < 2 and looks:
            _freeze_survivors()
            await asyncio.sleep(every)
            quiet, looks = (0 if busy() else quiet + 1), looks - 1
        _freeze_survivors()


def _freeze_survivors() -> None:
    """Collects the young generations (a few milliseconds: what the last second left as
    cyclic garbage is freed, not frozen for good), then freezes what is left."""
    gc.collect(1)
    gc.freeze()
