"""Token buckets, as client-go's flowcontrol and golang.org/x/time/rate have them, and
slots handed out at a fixed rate.

Pure: every method takes the time (monotonic seconds) from its caller, so the
arithmetic is tested without a clock. Its users in the operator:

* :class:`TokenBucket`: the API client (``PJ_API_QPS`` / ``PJ_API_BURST``), client-go's
  default client rate limiter, so that the operator can be held to
  kube-controller-manager's budget; and the Event spam filter (client-go's
  ``EventSourceObjectSpamFilter``);
* :class:`SlotScheduler`: the two write budgets all jobs share (status_writer.py), the
  DURATION refresh (``PJ_DURATION_REFRESH_QPS``) and progress-only status writes
  (``PJ_PROGRESS_WRITE_QPS``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved up; starts full.

    ``reserve`` always succeeds and says how long the caller must wait for its token
    (the bucket may go into debt, as ``rate.Limiter.Reserve`` does), so that waiters
    are served in order. ``take`` only succeeds when a token is there now.
    """

    rate: float
    burst: int
    tokens: float = -1.0
    last: float | None = None

    def __post_init__(self) -> None:
        if self.rate <= 0 or self.burst < 1:
            raise ValueError("a token bucket needs rate > 0 and burst >= 1")
        if self.tokens < 0:
            self.tokens = float(self.burst)

    def _refill(self, now: float) -> None:
        if self.last is not None and now > self.last:
            self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.rate)
        if self.last is None or now > self.last:
            self.last = now

    def reserve(self, now: float) -> float:
        """Takes a token, now or in the future: the seconds to wait before using it."""
        self._refill(now)
        self.tokens -= 1.0
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate

    def available(self, now: float) -> float:
        """The tokens there now (negative: owed to waiting reservations)."""
        self._refill(now)
        return self.tokens

    def take(self, now: float) -> bool:
        """Takes a token if one is there now (client-go's ``TryAccept``)."""
        self._refill(now)
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


class SlotScheduler:
    """Hands out write slots at most ``rate`` per second, first come first served.

    Time is cut into slots of 1 / ``rate`` seconds, each held by at most one caller. A
    caller that needs one gets the earliest free slot (``slot``) and keeps it until it
    writes or goes away (``release``), which frees the slot for others: the budget
    never goes to jobs that no longer exist. With N callers each refreshing as soon as
    it can, every caller is served once per N / ``rate`` seconds.
    """

    def __init__(self, rate: float) -> None:
        if rate <= 0:
            raise ValueError("a slot scheduler needs rate > 0")
        self._interval = 1.0 / rate
        self._held: dict[str, int] = {}
        self._taken: set[int] = set()
        #: No slot before this one is free (slots in the past never are).
        self._first_free = 0

    def slot(self, key: str, now: float) -> float:
        """The seconds until ``key`` may write (0: now), reserving a slot if it has none."""
        index = self._held.get(key)
        if index is None:
            index = self._reserve(math.floor(now / self._interval))
            self._held[key] = index
        return max(index * self._interval - now, 0.0)

    def _reserve(self, current: int) -> int:
        if len(self._taken) > 2 * len(self._held) + 64:
            # Slots in the past are never handed out again: forget them.
            self._taken = {i for i in self._taken if i >= current}
        index = max(self._first_free, current)
        while index in self._taken:
            index += 1
        self._taken.add(index)
        if index >= self._first_free:
            self._first_free = index + 1
        return index

    def postpone(self, key: str, now: float) -> float:
        """``key``'s slot has come but it may not write now: that slot goes unused (its
        time is over), and ``key`` holds the earliest free slot after ``now`` instead.
        The seconds until then, always more than 0: a caller held back waits for a
        slot of its own again, behind those already waiting, rather than polling."""
        self._held.pop(key, None)
        index = self._reserve(math.floor(now / self._interval) + 1)
        self._held[key] = index
        return index * self._interval - now

    def release(self, key: str, now: float) -> None:
        """``key`` wrote (with its slot, or with a write it had to make anyway) or is
        gone. A slot still ahead is freed for others; one whose time has come was used."""
        index = self._held.pop(key, None)
        if index is not None and index * self._interval > now:
            self._taken.discard(index)
            self._first_free = min(self._first_free, index)

    def __len__(self) -> int:
        return len(self._held)
