"""paralleljob.worker.Queue as a library, against a real redis-server."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from paralleljob.worker import Item, Queue, connect, enqueue
from tests.support.wait import wait_until

from .conftest import STREAM, dead_letters, pending

# Short, so that an empty queue is noticed at once and reclaims happen within the test's time.
BLOCK = 0.1


def queue(url: str, consumer: str, **kwargs: Any) -> Queue:
    return Queue(connect(url), STREAM, consumer=consumer, block=BLOCK, **kwargs)


def test_items_are_yielded_once_in_order_and_acked(redis_url: str, client: redis.Redis) -> None:
    # Enqueued before the group exists: the group starts at id 0, so nothing is skipped.
    enqueue(client, STREAM, [f"item {i}".encode() for i in range(10)])
    with queue(redis_url, "w1") as q:
        seen = [item.data for item in q.items()]
    assert seen == [f"item {i}".encode() for i in range(10)]
    assert pending(client) == 0
    assert client.xinfo_groups(STREAM)[0]["lag"] == 0


def test_an_empty_stream_is_drained_at_once_and_created(
    redis_url: str, client: redis.Redis
) -> None:
    with queue(redis_url, "w1") as q:
        assert list(q.items()) == []
    assert client.xinfo_groups(STREAM)[0]["name"] == b"workers"


def test_an_item_delivered_too_often_is_dead_lettered(redis_url: str, client: redis.Redis) -> None:
    entry_id = client.xadd(STREAM, {"item": b"poison"})
    client.xgroup_create(STREAM, "workers", id="0")
    client.xreadgroup("workers", "died", {STREAM: ">"})  # delivery 1, never acked
    with queue(redis_url, "w1", visibility_timeout=0.2, max_deliveries=1) as q:
        assert list(q.items()) == []
    assert dead_letters(client) == [
        {
            b"item": b"poison",
            b"id": entry_id,
            b"deliveries": b"2",
            b"reason": b"delivered 2 times, max-deliveries is 1",
            b"consumer": b"w1",
        }
    ]
    assert pending(client) == 0


def test_fail_dead_letters_with_the_reason_and_the_loop_goes_on(
    redis_url: str, client: redis.Redis
) -> None:
    enqueue(client, STREAM, [b"a", b"b"])
    with queue(redis_url, "w1") as q:
        for item in q.items():
            if item.data == b"a":
                q.fail(item, "no good")
    [letter] = dead_letters(client)
    assert (letter[b"item"], letter[b"reason"], letter[b"deliveries"]) == (b"a", b"no good", b"1")
    assert pending(client) == 0


def test_an_entry_without_the_item_field_is_dead_lettered(
    redis_url: str, client: redis.Redis
) -> None:
    client.xadd(STREAM, {"other": b"x"})
    with queue(redis_url, "w1") as q:
        assert list(q.items()) == []
    assert dead_letters(client)[0][b"reason"] == b"the entry has no 'item' field"


def test_a_restarted_consumer_takes_back_its_own_item_without_waiting(
    redis_url: str, client: redis.Redis
) -> None:
    client.xadd(STREAM, {"item": b"x"})
    client.xgroup_create(STREAM, "workers", id="0")
    client.xreadgroup("workers", "w1", {STREAM: ">"})  # the container that died
    # A visibility timeout far longer than the test: only the hand-back makes this pass.
    with queue(redis_url, "w1", visibility_timeout=600) as q:
        items = list(q.items())
    assert [(i.data, i.deliveries) for i in items] == [(b"x", 2)]


def test_an_item_left_by_an_exception_is_handed_back_at_once(
    redis_url: str, client: redis.Redis
) -> None:
    enqueue(client, STREAM, [b"x"])
    with pytest.raises(RuntimeError), queue(redis_url, "w1", visibility_timeout=600) as q:
        for _ in q.items():
            raise RuntimeError("handler crashed")
    assert pending(client) == 1
    with queue(redis_url, "w2", visibility_timeout=600) as q:
        items = list(q.items())
    assert [(i.data, i.deliveries) for i in items] == [(b"x", 2)]


def test_a_held_item_keeps_its_lease_and_others_wait_until_it_is_acked(
    redis_url: str, client: redis.Redis
) -> None:
    enqueue(client, STREAM, [b"long"])
    with queue(redis_url, "holder", visibility_timeout=0.3) as holder:
        item = holder.take()
        assert item is not None
        taken_by_waiter: list[Item | None] = []
        with queue(redis_url, "waiter", visibility_timeout=0.3) as waiter:
            thread = threading.Thread(target=lambda: taken_by_waiter.append(waiter.take()))
            thread.start()
            # Several visibility timeouts: the heartbeat must keep the item from the waiter,
            # which must neither take it nor call the queue drained while it is pending.
            thread.join(timeout=1.5)
            assert thread.is_alive()
            holder.ack(item)
            wait_until(lambda: not thread.is_alive(), timeout=5, what="the waiter to end")
    assert taken_by_waiter == [None]
    assert pending(client) == 0
