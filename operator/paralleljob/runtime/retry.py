"""The shell's one retry back-off: a failed API call (a sync, or pod creations) is
retried after 1 s, doubling up to 1 min, as upstream's job work queue rate-limits a
failing key. The delays are the core's (``backoff.delay_seconds``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core import delay_seconds


@dataclass
class Retry:
    """Consecutive failures of one kind of call, and the delay before the next try."""

    failures: int = 0

    def failed(self, base_seconds: float, max_seconds: float) -> float:
        """One more failure: how long to wait before trying again."""
        self.failures += 1
        return delay_seconds(self.failures, base_seconds, max_seconds)

    def succeeded(self) -> None:
        self.failures = 0
