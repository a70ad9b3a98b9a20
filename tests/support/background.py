"""A test's observer that runs beside it: its ``_run`` on a thread of its own for the
length of a ``with`` block, until ``_stop`` is set (a watch, a sampler)."""

from __future__ import annotations

import threading
from typing import Self


class Background:
    """The ``with`` protocol of a thread running ``_run``. A subclass (a dataclass) keeps
    ``_stop: threading.Event`` and ``_thread: threading.Thread | None`` as fields."""

    _stop: threading.Event
    _thread: threading.Thread | None

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)

    def _run(self) -> None:
        raise NotImplementedError
