"""Waiting on conditions with a deadline: the only synchronisation tests use."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class ConditionTimeout(AssertionError):
    """The awaited condition did not hold before the deadline."""


def _timed_out(timeout: float, what: str, last: object) -> ConditionTimeout:
    return ConditionTimeout(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


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
            raise _timed_out(timeout, what, last)
        time.sleep(interval)


async def wait_until_async(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.0,
) -> T:
    """``wait_until`` inside an event loop: the other tasks run while it waits.

    The deadline is real time (``time.monotonic``), whatever clock the code under test
    runs on. ``interval`` 0 polls at every turn of the loop, for tasks on a fake clock
    that must not run ahead between two looks; a longer one spares the CPU while real
    I/O is in flight.
    """
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, what, last)
        await asyncio.sleep(interval)
