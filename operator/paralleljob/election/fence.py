"""The write fence: under a leader election, no write leaves the process unless its own
clock says the Lease it holds is still valid.

client-go's leader election promises that a leader gives up within the renew deadline
of its last renewal and that a standby takes over no earlier than the lease duration
after it saw that renewal. A process paused past the Lease (a frozen VM, a SIGSTOP, a
long stop-the-world) resumes believing it leads: its renewal loop finds out only at its
next attempt, and until then every sync woken by the pause writes from caches and
expectations that are as old as the pause (issue 34: pod creates within 0.05-0.2 s of
resuming, after the new leader held the Lease).

The elector (elector.py) opens the fence for ``renew deadline`` from the moment each
successful attempt *started* (before its request was sent: the renewal the others saw
is no older than that), and closes it when it finds the Lease taken. The client
(kube.py) asks it just before each write goes out -- after the rate limiter and the
request slot, which can hold a request for seconds -- and a refused write is an
ApiError that never reached the API server, retried like any other.

The clock is CLOCK_BOOTTIME where the kernel has it: unlike CLOCK_MONOTONIC it also
counts a suspended machine, so a resumed laptop or VM finds its Lease expired too.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from .. import constants as c
from ..runtime.api import ApiError

#: The HTTP methods that read (the rest write).
READS = frozenset({"GET", "HEAD", "OPTIONS"})


def boot_clock() -> float:
    """Seconds since boot, suspended time included (monotonic where it is not counted)."""
    clock = getattr(time, "CLOCK_BOOTTIME", None)
    return time.clock_gettime(clock) if clock is not None else time.monotonic()


class WriteFence:
    """Whether this process may write now: shut until the first renewal opens it."""

    def __init__(self, clock: Callable[[], float] = boot_clock) -> None:
        self._clock = clock
        self._valid_until = -math.inf
        #: Writes refused since the process started.
        self.refused = 0

    def open_until(self, deadline: float) -> None:
        """A renewal succeeded: writes may go out until ``deadline`` (the clock's time)."""
        self._valid_until = deadline

    def close(self) -> None:
        """The Lease is lost (or given up): nothing more goes out."""
        self._valid_until = -math.inf

    def remaining(self) -> float:
        """Seconds until the fence shuts (0 or less: shut)."""
        return self._valid_until - self._clock()

    def is_open(self) -> bool:
        return self.remaining() > 0

    def check(self, method: str, path: str) -> float:
        """Raises ApiError (reason NotLeading) for a write the fence is shut to; else the
        seconds it stays open (inf for a read), which the client makes the request's
        deadline: an answer that comes later is not waited for."""
        if method in READS:
            return math.inf
        left = self.remaining()
        if left > 0:
            return left
        self.refused += 1
        raise ApiError(
            0,
            c.NOT_LEADING,
            f"{method} {path} not sent: this process's Lease is not valid by its own clock "
            "(paused past it, or lost)",
        )
