"""Waiting on conditions with a deadline: the only synchronisation tests use."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class ConditionTimeout(AssertionError):
    """The awaited condition did not hold before the deadline."""


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.2,
) -> T:
    """Polls ``probe`` until it returns a truthy value and returns that value.

    Raises ConditionTimeout naming ``what`` and the last value seen, so a failure
    says what was expected and what was there instead.
    """
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise ConditionTimeout(
                f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}"
            )
        time.sleep(interval)
