"""The worker side of the work-queue pattern: a Redis-stream queue and ``paralleljob-worker``."""

from .queue import Item, Queue, QueueUnavailable, connect, enqueue

__all__ = ["Item", "Queue", "QueueUnavailable", "connect", "enqueue"]
