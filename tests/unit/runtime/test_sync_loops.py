"""SyncLoops, the engine a ParallelCronJob syncs on: a key synced by one worker at a
time, again when its sync asks, a failure retried with back-off (a conflict at once),
a forgotten key never again."""

from __future__ import annotations

import asyncio

from paralleljob.config import ControllerConfig
from paralleljob.runtime.api import ApiError
from paralleljob.runtime.sync_loops import SyncLoops


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _loops(
    answers: list[object], clock: Clock, ready: asyncio.Event | None = None
) -> tuple[SyncLoops, list[str]]:
    synced: list[str] = []

    async def sync(key: str) -> float | None:
        synced.append(key)
        answer = answers.pop(0) if answers else None
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]

    config = ControllerConfig(retry_base_seconds=1.0, retry_max_seconds=60.0)
    return SyncLoops(sync, config, clock, workers=2, name="test", ready=ready), synced


def test_failures_back_off_and_a_conflict_syncs_again_at_once() -> None:
    clock = Clock()

    async def run() -> tuple[list[float | None], list[str]]:
        failure = ApiError(500, "InternalError", "boom")
        conflict = ApiError(409, "Conflict", "modified")
        loops, synced = _loops([failure, failure, conflict, 30.0], clock, asyncio.Event())
        loops.add("k")  # its workers wait at their gate: this test syncs it itself
        delays = [await loops.sync_safely("k") for _ in range(4)]
        await loops.stop()
        return delays, synced

    delays, synced = asyncio.run(run())
    assert delays == [1.0, 2.0, 0.0, 30.0]
    assert synced == ["k"] * 4


def test_a_key_is_synced_when_added_and_again_when_due_until_forgotten() -> None:
    clock = Clock()

    async def run() -> list[str]:
        loops, synced = _loops([0.0, None], clock)
        loops.add("k")
        for _ in range(50):
            await asyncio.sleep(0)
        assert synced == ["k", "k"], "a delay of 0 syncs again at once"
        loops.forget("k")
        loops._after("k", 5.0)
        assert loops.pending() == 0 and "k" not in loops
        await loops.stop()
        return synced

    assert asyncio.run(run()) == ["k", "k"]
