"""The GC callback that freezes what a long full collection left, and the freezes of
what a listing builds (gc_pauses.py)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable

import pytest

from paralleljob.runtime import gc_pauses
from paralleljob.runtime.gc_pauses import (
    DEFAULT_FULL_EVERY,
    FreezeAfterLongCollections,
    bound_full_collections,
    freeze_until_quiet,
    next_full_every,
)
from paralleljob.runtime.metrics import ThreadTimes


class Thresholds:
    """gc.get_threshold / gc.set_threshold of a fake collector (the test process's own
    must not change)."""

    def __init__(self, full_every: int = DEFAULT_FULL_EVERY) -> None:
        self.values = (700, 10, full_every)

    def get(self) -> tuple[int, int, int]:
        return self.values

    def set(self, young: int, middle: int, full_every: int) -> None:
        self.values = (young, middle, full_every)


def _callback(
    times: list[float],
    observed: list[float] | None = None,
    thresholds: Thresholds | None = None,
) -> tuple[FreezeAfterLongCollections, list[str]]:
    """A callback whose clock reads ``times`` in turn, freezing into a list and observing
    into ``observed``."""
    frozen: list[str] = []
    durations: list[float] = [] if observed is None else observed
    thresholds = thresholds or Thresholds()

    def run_now(freeze: Callable[[], None]) -> None:
        freeze()

    callback = FreezeAfterLongCollections(
        run_now,
        longest=0.05,
        clock=iter(times).__next__,
        freeze=lambda: frozen.append("x"),
        observe=durations.append,
        times=lambda: None,
        observe_blocked=lambda _: None,
        thresholds=thresholds.get,
        set_thresholds=thresholds.set,
    )
    return callback, frozen


def _collect(callback: FreezeAfterLongCollections, generation: int) -> None:
    callback("start", {"generation": generation})
    callback("stop", {"generation": generation})


def test_only_a_long_full_collection_freezes_its_survivors() -> None:
    # Three full collections: 10 ms, 200 ms, 49 ms.
    callback, frozen = _callback([0.0, 0.01, 1.0, 1.2, 2.0, 2.049])
    for _ in range(3):
        _collect(callback, 2)
    assert frozen == ["x"], "only the 200 ms collection froze its survivors"


def test_every_full_collection_is_timed() -> None:
    observed: list[float] = []
    callback, _ = _callback([0.0, 0.01, 1.0, 1.2], observed)
    _collect(callback, 2)
    _collect(callback, 1)  # not timed: the clock would run out
    _collect(callback, 2)
    assert observed == pytest.approx([0.01, 0.2])


def test_a_full_collection_s_own_part_leaves_out_its_wait_for_a_cpu() -> None:
    """A 300 ms collection on a busy machine: 120 ms of it waiting for a CPU, 180 ms on
    one: the operator's own part is 180 ms."""
    blocked: list[float] = []
    times = iter([ThreadTimes(10.0, 5.0), ThreadTimes(10.18, 5.12)])
    thresholds = Thresholds()
    callback = FreezeAfterLongCollections(
        lambda freeze: None,
        clock=iter([1.0, 1.3]).__next__,
        observe=lambda _: None,
        times=times.__next__,
        observe_blocked=blocked.append,
        thresholds=thresholds.get,
        set_thresholds=thresholds.set,
    )
    _collect(callback, 2)
    assert blocked == pytest.approx([0.18])
    # 180 ms of its own: a full collection every middle one (25 / 180 of ten rounds to 1).
    assert thresholds.values == (700, 10, 1)


def test_young_collections_are_not_timed() -> None:
    callback, frozen = _callback([])  # the clock would raise if read
    _collect(callback, 0)
    _collect(callback, 1)
    assert frozen == []


@pytest.mark.parametrize(
    ("current", "own_ms", "expected"),
    [
        (10, 60.0, 4),  # over the 25 ms target: in proportion
        (10, 26.0, 9),  # just over: one fewer at least
        (4, 24.0, 4),  # near the target: kept
        (4, 12.4, 5),  # under half of it: one more
        (10, 1.0, 10),  # never above Python's default
        (1, 500.0, 1),  # never below one
    ],
)
def test_the_third_threshold_follows_the_full_collections_own_time(
    current: int, own_ms: float, expected: int
) -> None:
    assert next_full_every(current, own_ms / 1000) == expected


def test_a_growth_makes_full_collections_more_frequent_and_its_end_less() -> None:
    thresholds = Thresholds()
    # A 60 ms collection, then ten of 2 ms.
    clock = [0.0, 0.06] + [t for i in range(1, 11) for t in (float(i), i + 0.002)]
    callback, _ = _callback(clock, thresholds=thresholds)
    _collect(callback, 2)
    assert thresholds.values[2] == 4
    for _ in range(10):
        _collect(callback, 2)
    assert thresholds.values[2] == DEFAULT_FULL_EVERY


def test_the_installed_callback_is_removed_again_with_the_thresholds() -> None:
    before = gc.get_threshold()
    remove = bound_full_collections(lambda freeze: None)
    installed = gc.callbacks[-1]
    assert isinstance(installed, FreezeAfterLongCollections)
    gc.set_threshold(before[0], before[1], 3)
    remove()
    assert installed not in gc.callbacks
    assert gc.get_threshold() == before


def test_the_collector_runs_none_of_its_own_while_a_listing_is_frozen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two listings overlapping (a restart's start and attach): off from the first one's
    start, on again only when the last one ends."""
    frozen: list[bool] = []
    monkeypatch.setattr(gc_pauses, "_freeze_survivors", lambda: frozen.append(gc.isenabled()))
    looks = {"pods": 3, "jobs": 6}
    seen: list[bool] = []

    def busy(listing: str) -> Callable[[], bool]:
        def look() -> bool:
            seen.append(gc.isenabled())
            looks[listing] -= 1
            return looks[listing] > 0

        return look

    async def both() -> None:
        await asyncio.gather(
            freeze_until_quiet(busy("pods"), every=0.001),
            freeze_until_quiet(busy("jobs"), every=0.001),
        )

    assert gc.isenabled()
    asyncio.run(both())
    assert gc.isenabled()
    assert seen and not any(seen) and frozen and not any(frozen)
