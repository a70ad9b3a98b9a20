"""The GC callback that freezes what a long full collection left (gc_pauses.py)."""

from __future__ import annotations

import gc
from collections.abc import Callable

import pytest

from paralleljob.shell.gc_pauses import FreezeAfterLongCollections, bound_full_collections


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
