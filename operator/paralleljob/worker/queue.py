"""A work queue on a Redis stream with one consumer group: at-least-once, nothing lost.

An item is one stream entry whose field ``item`` holds the bytes a producer enqueued. Workers
of the group take new entries with XREADGROUP, reclaim with XAUTOCLAIM the entries that a dead
or frozen worker left pending longer than the visibility timeout, and ack an entry only once it
was processed. While a worker holds an entry a heartbeat thread keeps the entry's idle time at
zero, so an item that takes longer than the visibility timeout is not reclaimed from a live
worker: the timeout only bounds how long a dead worker's item waits.

The queue is drained, and ``take`` returns None, only when the group has no undelivered entry
and no entry is pending for any consumer: a worker that finds nothing new keeps waiting while
another one still holds an item, because that item may yet come back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Any, TypeVar, cast

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.typing import EncodableT, StreamEntry

log = logging.getLogger(__name__)

ITEM_FIELD = b"item"
DEAD_LETTER_SUFFIX = ":dead"
DEFAULT_GROUP = "workers"
ENQUEUE_BATCH = 1000
# Longest a blocking XREADGROUP waits: also how late a worker notices stop() or a stale entry.
DEFAULT_BLOCK_SECONDS = 1.0
MAX_RETRY_DELAY = 5.0

# A dead worker held one item, or a few whose XREADGROUP replies it never got.
LEFTOVERS_MAX = 100

# The idle time a released entry gets: longer than any worker's visibility timeout, since
# workers of one group need not agree on it.
RELEASED_IDLE_MS = 10 * 365 * 24 * 3600 * 1000

T = TypeVar("T")

# Both scripts act only if CONSUMER still holds the entry: a worker that was frozen past the
# visibility timeout must neither take back nor settle an entry another worker reclaimed.
# KEYS: stream. ARGV: group, consumer, entry id, idle time in ms.
# XCLAIM ... JUSTID sets the idle time without counting a delivery.
_SET_IDLE = """
if #redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2]) == 0 then
  return 0
end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'IDLE', ARGV[4], 'JUSTID')
return 1
"""
# KEYS: stream, dead-letter stream. ARGV: group, consumer, entry id, then the dead letter's
# field/value pairs (none to just ack). One script, so a dead letter is never written twice
# or without its ack.
_SETTLE = """
if #redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2]) == 0 then
  return 0
end
if #ARGV > 3 then
  redis.call('XADD', KEYS[2], '*', unpack(ARGV, 4))
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
return 1
"""


class QueueUnavailable(Exception):
    """Redis did not answer for longer than the retry budget."""


@dataclass(frozen=True)
class Item:
    id: str
    data: bytes
    # How many times the group handed this entry to a consumer, this time included.
    deliveries: int


# An item taken from the group, and whether its entry has the item field at all.
_Taken = tuple[Item, bool]


def connect(url: str) -> redis.Redis:
    """A client for ``url`` that fails fast, leaving retries to ``with_retry``'s time budget."""
    return redis.Redis.from_url(
        url,
        # The replies are parsed in RESP2's shapes (lists, not RESP3's maps).
        protocol=2,
        socket_connect_timeout=5,
        socket_timeout=DEFAULT_BLOCK_SECONDS + 10,
        retry=Retry(NoBackoff(), 0),
    )


def with_retry(call: Callable[[], T], budget: float) -> T:
    """``call()``, retried with exponential back-off while Redis is unreachable.

    Raises QueueUnavailable once Redis has been unreachable for ``budget`` seconds.
    """
    delay = 0.1
    deadline: float | None = None
    while True:
        try:
            return call()
        except (redis.ConnectionError, redis.TimeoutError) as err:
            now = time.monotonic()
            if deadline is None:
                log.warning("Redis unreachable (%s); retrying for up to %gs", err, budget)
                deadline = now + budget
            if now >= deadline:
                reason = " ".join(str(err).split())
                raise QueueUnavailable(f"Redis unreachable for {budget:g}s: {reason}") from err
            time.sleep(min(delay, deadline - now))
            delay = min(delay * 2, MAX_RETRY_DELAY)


def enqueue(client: redis.Redis, stream: str, items: Iterable[bytes]) -> int:
    """Appends each item as one entry of ``stream``; returns how many were added."""
    added = 0
    batch: list[bytes] = []
    for item in items:
        batch.append(item)
        if len(batch) == ENQUEUE_BATCH:
            added += _add(client, stream, batch)
            batch = []
    return added + _add(client, stream, batch)


def _add(client: redis.Redis, stream: str, batch: list[bytes]) -> int:
    pipe = client.pipeline(transaction=False)
    for item in batch:
        pipe.xadd(stream, {ITEM_FIELD: item})
    pipe.execute()
    return len(batch)


class Queue:
    """One consumer of a stream's consumer group.

    Use it as a context manager, which creates the group if needed and, on exit, hands the
    items it still holds back to the group::

        with Queue(connect(url), "jobs", consumer=pod_name) as queue:
            for item in queue.items():
                handle(item.data)
    """

    def __init__(
        self,
        client: redis.Redis,
        stream: str,
        *,
        consumer: str,
        group: str = DEFAULT_GROUP,
        visibility_timeout: float = 60.0,
        max_deliveries: int = 3,
        retry_budget: float = 60.0,
        block: float = DEFAULT_BLOCK_SECONDS,
    ) -> None:
        if max_deliveries < 1:
            raise ValueError("max_deliveries must be at least 1")
        self.client = client
        self.stream = stream
        self.dead_letter_stream = stream + DEAD_LETTER_SUFFIX
        self.consumer = consumer
        self.group = group
        self.max_deliveries = max_deliveries
        self.retry_budget = retry_budget
        self._visibility_ms = max(1, round(visibility_timeout * 1000))
        self._block_ms = max(1, round(block * 1000))
        self._set_idle = client.register_script(_SET_IDLE)
        self._settle = client.register_script(_SETTLE)
        self._claim_cursor = "0-0"
        self._held: dict[str, Item] = {}
        self._held_lock = threading.Lock()
        self._stop = threading.Event()
        self._closed = threading.Event()
        self._heartbeat = threading.Thread(
            target=self._renew_leases,
            args=(visibility_timeout / 3,),
            name=f"lease-{consumer}",
            daemon=True,
        )

    def __enter__(self) -> Queue:
        self._redis(self._create_group)
        self._release_leftovers()
        self._heartbeat.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closed.set()
        self._heartbeat.join()
        for item in self._held_items():
            self.release(item)

    def stop(self) -> None:
        """Take no more items (callable from a signal handler or another thread)."""
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def items(self) -> Iterator[Item]:
        """Yields items until the queue is drained or stop() is called.

        An item is acked when the loop asks for the next one, unless ``fail`` settled it
        already. An item the loop leaves by ``break`` or an exception stays pending; leaving
        the ``with`` block hands it back to the group at once.
        """
        while (item := self.take()) is not None:
            yield item
            self.ack(item)

    def take(self, idle: Callable[[], None] | None = None) -> Item | None:
        """The next item to process, or None once the queue is drained or stop() was called.

        ``idle`` is called each time a read found nothing (at most every block seconds),
        not when items follow one another: the worker is then waiting, idle."""
        while not self._stop.is_set():
            taken = self._reclaim() or self._read_new()
            if taken is None:
                if idle is not None:
                    idle()
                if self._drained():
                    return None
                continue
            item, well_formed = taken
            self._hold(item)
            if self._stop.is_set():
                # Taken after stop(): hand it straight back rather than start it.
                self.release(item)
            elif not well_formed:
                self.fail(item, f"the entry has no {ITEM_FIELD.decode()!r} field")
            elif item.deliveries > self.max_deliveries:
                limit = self.max_deliveries
                self.fail(item, f"delivered {item.deliveries} times, max-deliveries is {limit}")
            else:
                return item
        return None

    def ack(self, item: Item) -> None:
        """Marks ``item`` done; a no-op if it was settled already."""
        if self._unhold(item):
            self._settle_entry(item, [])

    def fail(self, item: Item, reason: str) -> None:
        """Moves ``item`` to the dead-letter stream with ``reason``, and acks it."""
        if not self._unhold(item):
            return
        letter: list[EncodableT] = [b"item", item.data, b"id", item.id]
        letter += [b"deliveries", item.deliveries, b"reason", reason, b"consumer", self.consumer]
        log.warning("item %s dead-lettered to %s: %s", item.id, self.dead_letter_stream, reason)
        self._settle_entry(item, letter)

    def release(self, item: Item) -> None:
        """Leaves ``item`` pending but at once reclaimable, by this worker or another one."""
        if not self._unhold(item):
            return
        if not self._redis(partial(self._set_entry_idle, item.id, stale=True)):
            log.warning("item %s was reclaimed by another consumer already", item.id)

    def _create_group(self) -> None:
        # Id 0: the group also gets the items enqueued before any worker started.
        try:
            self.client.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except redis.ResponseError as err:
            if not str(err).startswith("BUSYGROUP"):
                raise

    def _release_leftovers(self) -> None:
        """Hands back what a previous run under this consumer name held when it died.

        A restarted container keeps its pod's name, so its predecessor's items need not wait
        out the visibility timeout; reclaiming them counts a delivery, so a poison item that
        kills the worker still ends in the dead-letter stream.
        """
        pending = self._redis(
            lambda: self.client.xpending_range(
                self.stream, self.group, "-", "+", LEFTOVERS_MAX, consumername=self.consumer
            )
        )
        for entry in pending:
            entry_id = _text(entry["message_id"])
            self._redis(partial(self._set_entry_idle, entry_id, stale=True))

    def _reclaim(self) -> _Taken | None:
        reply: list[Any] = self._redis(
            lambda: self.client.xautoclaim(
                self.stream,
                self.group,
                self.consumer,
                self._visibility_ms,
                start_id=self._claim_cursor,
                count=1,
            )
        )
        # The cursor carries the PEL scan on from one call to the next, so a long PEL of
        # fresh entries cannot hide a stale one behind it.
        self._claim_cursor = _text(reply[0])
        entries: list[StreamEntry] = reply[1]
        if not entries:
            return None
        entry_id = _text(entries[0][0] or b"")
        return _taken(entries[0], self._deliveries(entry_id))

    def _read_new(self) -> _Taken | None:
        reply = self._redis(
            lambda: self.client.xreadgroup(
                self.group, self.consumer, {self.stream: ">"}, count=1, block=self._block_ms
            )
        )
        # RESP2 (see connect): [[stream, [entry]]], or nothing when the block timed out.
        entries: list[StreamEntry] = cast(list[Any], reply)[0][1] if reply else []
        if not entries:
            return None
        return _taken(entries[0], 1)

    def _drained(self) -> bool:
        groups = self._redis(lambda: self.client.xinfo_groups(self.stream))
        group = next((g for g in groups if _text(g["name"]) == self.group), None)
        if group is None:
            return False  # destroyed under us: the next read fails with Redis's NOGROUP
        # Redis 7.0 cannot compute the lag after an XDEL or a trim (it is then null): the
        # empty XREADGROUP just before is the evidence that nothing is undelivered.
        return bool(group["pending"] == 0 and group["lag"] in (0, None))

    def _deliveries(self, entry_id: str) -> int:
        pending = self._redis(
            lambda: self.client.xpending_range(
                self.stream, self.group, entry_id, entry_id, 1, consumername=self.consumer
            )
        )
        # Not pending for us any more only if another consumer took it meanwhile: the
        # settle script then leaves it alone, whatever count this says.
        return int(pending[0]["times_delivered"]) if pending else 1

    def _hold(self, item: Item) -> None:
        with self._held_lock:
            self._held[item.id] = item

    def _unhold(self, item: Item) -> bool:
        with self._held_lock:
            return self._held.pop(item.id, None) is not None

    def _held_items(self) -> list[Item]:
        with self._held_lock:
            return list(self._held.values())

    def _settle_entry(self, item: Item, letter: list[EncodableT]) -> None:
        keys = [self.stream, self.dead_letter_stream]
        args: list[EncodableT] = [self.group, self.consumer, item.id, *letter]
        if not self._redis(lambda: self._settle(keys=keys, args=args)):
            log.warning("item %s was reclaimed by another consumer; left to it", item.id)

    def _set_entry_idle(self, entry_id: str, *, stale: bool) -> bool:
        idle_ms = RELEASED_IDLE_MS if stale else 0
        args: list[EncodableT] = [self.group, self.consumer, entry_id, idle_ms]
        return bool(self._set_idle(keys=[self.stream], args=args))

    def _renew_leases(self, interval: float) -> None:
        while not self._closed.wait(interval):
            for item in self._held_items():
                self._renew_lease(item)

    def _renew_lease(self, item: Item) -> None:
        # Under the lock, so that a renewal cannot land after release() made the entry stale.
        with self._held_lock:
            if item.id not in self._held:
                return
            try:
                still_held = self._set_entry_idle(item.id, stale=False)
            except redis.RedisError as err:
                # The next beat tries again; if Redis stays away the main loop gives up.
                log.warning("could not renew the lease of item %s: %s", item.id, err)
                return
            if not still_held:
                del self._held[item.id]
                log.warning("lost item %s to another consumer", item.id)

    def _redis(self, call: Callable[[], T]) -> T:
        return with_retry(call, self.retry_budget)


def _taken(entry: StreamEntry, deliveries: int) -> _Taken:
    """The entry as an Item, and whether it has the item field."""
    entry_id, fields = entry[0] or b"", entry[1] or {}
    data = fields.get(ITEM_FIELD)
    if isinstance(data, str):
        data = data.encode()
    return Item(_text(entry_id), data or b"", deliveries), data is not None


def _text(value: bytes | str | int) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
