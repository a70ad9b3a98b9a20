"""One timer for every job: when each job's next sync is due (the delay its last sync
asked for: a back-off, a deadline, a TTL, a DURATION slot; or the rest of an event
batch). A heap of due times and one task that sleeps until the earliest, instead of a
sleeping task per job. A job has at most one due time: setting it again replaces it
(the old heap entry is skipped when it comes up)."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Callable


class Timers:
    def __init__(self, monotonic: Callable[[], float], on_due: Callable[[str], None]) -> None:
        self._monotonic = monotonic
        self._on_due = on_due
        self._heap: list[tuple[float, int, str]] = []
        self._due: dict[str, float] = {}
        self._order = itertools.count()
        self._changed = asyncio.Event()

    def set(self, key: str, due: float) -> None:
        """``key`` is due at ``due`` (monotonic seconds), whatever it was due at before."""
        self._due[key] = due
        heapq.heappush(self._heap, (due, next(self._order), key))
        if len(self._heap) > 4 * len(self._due) + 64:
            self._compact()
        if self._heap[0][2] == key:
            self._changed.set()  # a new earliest: the sleeper wakes to sleep less

    def _compact(self) -> None:
        """Drops the entries replaced or cancelled (they would only be skipped later)."""
        self._heap = [(due, next(self._order), key) for key, due in self._due.items()]
        heapq.heapify(self._heap)
        self._changed.set()

    def cancel(self, key: str) -> None:
        self._due.pop(key, None)

    def due(self, key: str) -> float | None:
        return self._due.get(key)

    def __len__(self) -> int:
        return len(self._due)

    async def run(self) -> None:
        """Until cancelled: each key is handed to ``on_due`` once its time comes."""
        while True:
            self._changed.clear()
            wait = self._fire_due()
            if wait is None:
                await self._changed.wait()
            else:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a
                # cancellation that comes as its timeout fires, and the loop then waits
                # for ever (the operator's stop_all hung on it, 1 run in 15).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._changed.wait()

    def _fire_due(self) -> float | None:
        """Hands on every key due by now; returns the wait until the next (None: none)."""
        now = self._monotonic()
        while self._heap:
            due, _, key = self._heap[0]
            if self._due.get(key) != due:
                heapq.heappop(self._heap)  # replaced or cancelled
                continue
            if due > now:
                return due - now
            heapq.heappop(self._heap)
            del self._due[key]
            self._on_due(key)
        return None
