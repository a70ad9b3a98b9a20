"""The order a pytest-xdist run starts its tests in: the tests marked ``long`` first,
one at the head of each worker's share (tests/conftest.py registers this plugin)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """After every deselection (``-m``, the exclusive tests), in each worker alike."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        items[:] = spread_long(items, workers, lambda item: bool(item.get_closest_marker("long")))


def spread_long(items: list[T], workers: int, is_long: Callable[[T], bool]) -> list[T]:
    """pytest-xdist's worksteal hands each worker a contiguous share of the items first
    (the first worker len // workers, the next a share of what is left, and so on) and
    later steals from the ends of the queues. A test that takes minutes of wall time
    (mostly waiting on the cluster's clock) is put at the head of a share, round robin,
    so that each starts at once, on a worker of its own, instead of ending the run."""
    long = [item for item in items if is_long(item)]
    rest = [item for item in items if not is_long(item)]
    sizes, left = [], len(items)
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    heads: list[list[T]] = [[] for _ in range(workers)]
    for n, item in enumerate(long):
        heads[n % workers].append(item)
    spread: list[T] = []
    for head, size in zip(heads, sizes, strict=True):
        spread += head
        take = max(0, size - len(head))
        spread += rest[:take]
        rest = rest[take:]
    return spread + rest
