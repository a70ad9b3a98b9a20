"""The order a -n run starts its tests in (tests/support/long_first.py): each long test at
the head of a worker's first share, nothing lost or repeated, the rest in their order."""

from __future__ import annotations

import pytest

from tests.support.long_first import spread_long


def _shares(items: list[str], workers: int) -> list[list[str]]:
    """The first shares pytest-xdist's worksteal hands out (check_schedule)."""
    pending, shares = list(items), []
    for i in range(workers):
        take = len(pending) // (workers - i)
        shares.append(pending[:take])
        pending = pending[take:]
    return shares


@pytest.mark.parametrize(("n", "workers"), [(100, 4), (7, 3), (2407, 4), (10, 6)])
def test_each_long_test_heads_a_share_of_its_own(n: int, workers: int) -> None:
    items = [f"t{i}" for i in range(n)]
    long = {items[-1], items[-2], items[n // 2]}
    spread = spread_long(items, workers, lambda item: item in long)
    assert sorted(spread) == sorted(items)
    assert [i for i in spread if i not in long] == [i for i in items if i not in long]
    heads = [share[0] for share in _shares(spread, workers) if share]
    assert long <= set(heads) or len(long) > workers


def test_more_long_tests_than_workers_are_dealt_round_robin() -> None:
    items = [f"long{i}" for i in range(5)] + [f"t{i}" for i in range(15)]
    spread = spread_long(items, 2, lambda item: item.startswith("long"))
    first, second = _shares(spread, 2)
    assert first[:3] == ["long0", "long2", "long4"]
    assert second[:2] == ["long1", "long3"]


def test_without_long_tests_nothing_moves() -> None:
    items = [f"t{i}" for i in range(9)]
    assert spread_long(items, 4, lambda item: False) == items
