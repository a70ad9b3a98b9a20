"""wait_until: a fixed period when asked, else a back-off that spares the CPU."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.support.wait import ConditionTimeout, wait_until


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return slept


def _true_after(looks: int) -> Callable[[], bool]:
    seen = iter(range(looks + 1))
    return lambda: next(seen) == looks


def test_without_an_interval_the_period_backs_off_to_its_cap(sleeps: list[float]) -> None:
    assert wait_until(_true_after(7), timeout=60, what="the seventh look") is True
    assert sleeps == pytest.approx([0.2, 0.3, 0.45, 0.675, 1.0, 1.0, 1.0])


def test_an_interval_given_is_kept(sleeps: list[float]) -> None:
    wait_until(_true_after(3), timeout=60, what="the third look", interval=0.5)
    assert sleeps == [0.5, 0.5, 0.5]


def test_the_deadline_names_what_was_awaited_and_the_last_value() -> None:
    with pytest.raises(ConditionTimeout, match="timed out after 0s waiting for nothing; last: 0"):
        wait_until(lambda: 0, timeout=0, what="nothing")
