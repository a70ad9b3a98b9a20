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


#: Without an ``interval``, polling starts at FIRST_INTERVAL and grows by BACKOFF up to
#: MAX_INTERVAL: a probe is mostly a kubectl process (about 0.1 s of CPU on this
#: machine, and a TLS handshake for the API server), so a test that waits a minute at a
#: fixed 0.2 s kept a third of a core busy doing nothing; a quick condition is still
#: seen within a fifth of a second.
FIRST_INTERVAL = 0.2
BACKOFF = 1.5
MAX_INTERVAL = 1.0


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float | None = None,
) -> T:
    """Polls ``probe`` until it returns a truthy value and returns that value.

    ``interval`` fixes the period between two looks; without it the period backs off
    (FIRST_INTERVAL to MAX_INTERVAL). Raises ConditionTimeout naming ``what`` and the
    last value seen, so a failure says what was expected and what was there instead.
    """
    deadline = time.monotonic() + timeout
    period = FIRST_INTERVAL if interval is None else interval
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, what, last)
        time.sleep(period)
        if interval is None:
            period = min(period * BACKOFF, MAX_INTERVAL)


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
