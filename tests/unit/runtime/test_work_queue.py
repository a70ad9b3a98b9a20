"""The work queue (work_queue.py): a key once however often added, never handed out
twice at once, urgent keys first, and a getter that takes only urgent ones."""

from __future__ import annotations

import asyncio

from paralleljob.runtime.work_queue import WorkQueue


async def _drain(queue: WorkQueue) -> list[str]:
    taken = []
    while len(queue):
        key = await queue.get()
        queue.done(key)
        taken.append(key)
    return taken


def test_a_key_added_while_processed_comes_again_once_done_urgent_if_added_so() -> None:
    async def run() -> tuple[list[str], list[str]]:
        queue = WorkQueue()
        for key in ("a", "b", "c"):
            queue.add(key)
        first = await queue.get()
        queue.add(first)
        queue.add(first)
        queue.done(first)
        again = await _drain(queue)
        queue.add("x")
        queue.add("y")
        taken = await queue.get()
        queue.add(taken, urgent=True)  # still new after this sync: ahead of the rest
        queue.done(taken)
        return [first, *again], [taken, *await _drain(queue)]

    plain, urgent = asyncio.run(run())
    assert plain == ["a", "b", "c", "a"]
    assert urgent == ["x", "x", "y"]


def test_a_getter_that_takes_only_urgent_keys_waits_for_one_or_to_be_woken() -> None:
    async def run() -> list[str]:
        queue, only_urgent, taken = WorkQueue(), [True], []
        queue.add("plain")

        async def getter() -> None:
            taken.append(await queue.get(urgent_only=lambda: only_urgent[0]))

        task = asyncio.create_task(getter())
        await asyncio.sleep(0)
        assert not taken, "only a plain key is queued"
        queue.add("new", urgent=True)
        await task
        task = asyncio.create_task(getter())
        await asyncio.sleep(0)
        only_urgent[0] = False
        queue.wake()
        await task
        return taken

    assert asyncio.run(run()) == ["new", "plain"]
