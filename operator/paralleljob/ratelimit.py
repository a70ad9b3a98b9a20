"""Token buckets, as client-go's flowcontrol and golang.org/x/time/rate have them.

Pure: every method takes the time (monotonic seconds) from its caller, so the
arithmetic is tested without a clock. Three users in the operator:

* the API client (``PJ_API_QPS`` / ``PJ_API_BURST``): client-go's default client
  rate limiter, so that the operator can be held to kube-controller-manager's budget;
* the DURATION refresh budget (see :class:`SlotScheduler`);
* the Event spam filter (client-go's ``EventSourceObjectSpamFilter``).
"""

from __future__ import annotations

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

    A caller that needs a slot gets one at the earliest free time (``reserve``) and
    keeps it until it is used or released; ``due`` says whether its time has come.
    With more callers than slots, each waits its turn: with N callers each refreshing
    as soon as it can, every caller is served once per N / ``rate`` seconds.
    """

    def __init__(self, rate: float) -> None:
        self._bucket = TokenBucket(rate, 1)
        self._slots: dict[str, float] = {}

    def slot(self, key: str, now: float) -> float:
        """The seconds until ``key`` may write (0: now), reserving a slot if it has none."""
        at = self._slots.get(key)
        if at is None:
            at = now + self._bucket.reserve(now)
            self._slots[key] = at
        return max(at - now, 0.0)

    def release(self, key: str) -> None:
        """``key`` wrote (with its slot, or with a write it had to make anyway) or is gone."""
        self._slots.pop(key, None)

    def __len__(self) -> int:
        return len(self._slots)
