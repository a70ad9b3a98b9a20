"""Background: the observer's thread runs for the length of the with-block."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from tests.support.background import Background
from tests.support.wait import wait_until


@dataclass
class Ticker(Background):
    ticks: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.wait(0.001):
            self.ticks += 1


def test_the_loop_runs_inside_the_block_and_stops_at_its_end() -> None:
    with Ticker() as ticker:
        wait_until(lambda: ticker.ticks > 3, timeout=10, what="ticks")
    # Joined: no tick comes after the block.
    assert ticker._thread is not None and not ticker._thread.is_alive()
