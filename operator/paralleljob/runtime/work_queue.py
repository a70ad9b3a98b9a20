"""client-go's work queue (util/workqueue), for job uids: a key is queued at most once
however often it is added; a key being processed is not handed out again, and if added
meanwhile it is queued once its processing is done. So one job is never synced twice at
once, and a few workers sync every job (upstream's ``--concurrent-job-syncs``)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable


def _never() -> bool:
    return False


class WorkQueue:
    def __init__(self) -> None:
        self._queue: deque[str] = deque()
        self._urgent: deque[str] = deque()
        #: Keys waiting to be processed (in the queue, or to be once done).
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        #: Keys added urgent while being processed.
        self._urgent_when_done: set[str] = set()
        self._ready = asyncio.Event()

    def add(self, key: str, *, urgent: bool = False) -> None:
        """Queues ``key`` unless it is queued already (``urgent``: ahead of the rest; a
        key being processed is queued once done)."""
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            if urgent:
                self._urgent_when_done.add(key)
            return
        (self._urgent if urgent else self._queue).append(key)
        self._ready.set()

    async def get(
        self, *, urgent_only: Callable[[], bool] = _never, paused: Callable[[], bool] = _never
    ) -> str:
        """The next key, urgent ones first (only those while ``urgent_only()`` says so,
        none while ``paused()``); it is being processed until :meth:`done`."""
        while paused() or not (self._urgent or (self._queue and not urgent_only())):
            self._ready.clear()
            await self._ready.wait()
        key = (self._urgent or self._queue).popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        """``key`` is processed: if it was added meanwhile, it is queued again."""
        self._processing.discard(key)
        if key in self._dirty:
            urgent = key in self._urgent_when_done
            self._urgent_when_done.discard(key)
            (self._urgent if urgent else self._queue).append(key)
            self._ready.set()

    def wake(self) -> None:
        """The getters look again: what their ``urgent_only`` or ``paused`` says has
        changed."""
        self._ready.set()

    def processing(self, key: str) -> bool:
        return key in self._processing

    def __len__(self) -> int:
        """Keys waiting to be processed."""
        return len(self._dirty)
