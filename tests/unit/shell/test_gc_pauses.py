"""The GC callback that freezes what a long full collection left (gc_pauses.py)."""

from __future__ import annotations

import gc
from collections.abc import Callable

import pytest

from paralleljob.shell.gc_pauses import FreezeAfterLongCollections, bound_full_collections
from paralleljob.shell.metrics import ThreadTimes


def _callback(
    times: list[float], observed: list[float] | None = None
) -> tuple[FreezeAfterLongCollections, list[str]]:
    """A callback whose clock reads ``times`` in turn, freezing into a list and observing
    into ``observed``."""
    frozen: list[str] = []
    durations: list[float] = [] if observed is None else observed

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
    callback = FreezeAfterLongCollections(
        lambda freeze: None,
        clock=iter([1.0, 1.3]).__next__,
        observe=lambda _: None,
        times=times.__next__,
        observe_blocked=blocked.append,
    )
    _collect(callback, 2)
    assert blocked == pytest.approx([0.18])


def test_young_collections_are_not_timed() -> None:
    callback, frozen = _callback([])  # the clock would raise if read
    _collect(callback, 0)
    _collect(callback, 1)
    assert frozen == []


def test_the_installed_callback_is_removed_again() -> None:
    remove = bound_full_collections(lambda freeze: None)
    installed = gc.callbacks[-1]
    assert isinstance(installed, FreezeAfterLongCollections)
    remove()
    assert installed not in gc.callbacks
