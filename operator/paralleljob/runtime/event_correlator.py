"""client-go's event correlator (tools/record/events_cache.go), without the spam filter
(events.py has it): an Event that repeats is counted on the Event object already posted,
not posted again.

* ``EventAggregator``: more than :data:`MAX_SIMILAR` Events of one object, type and
  reason with different messages within :data:`AGGREGATE_SECONDS` are folded into one
  whose message starts "(combined from similar events): ".
* ``EventLogger``: an Event identical to one already posted (same object, type, reason
  and message, or the same combined one) is that Event again: its ``count`` goes up and
  its ``lastTimestamp`` moves (a patch), its name and ``firstTimestamp`` stay.

Pure: the caller passes the time; the posting is the recorder's (events.py)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

#: client-go's defaultAggregateMaxEvents and defaultAggregateIntervalInSeconds.
MAX_SIMILAR = 10
AGGREGATE_SECONDS = 600
#: client-go's maxLruCacheEntries.
CACHE_ENTRIES = 4096
COMBINED = "(combined from similar events): "

#: An Event's identity without its message: the object, type and reason.
SimilarKey = tuple[str, str, str]


@dataclass(frozen=True)
class Occurrence:
    """What to post: a new Event (``new``), or the posted one ``name`` again."""

    name: str
    message: str
    count: int
    first: datetime
    new: bool


@dataclass
class _Similar:
    messages: set[str] = field(default_factory=set)
    last: datetime | None = None


class EventCorrelator:
    def __init__(
        self,
        max_similar: int = MAX_SIMILAR,
        interval: float = AGGREGATE_SECONDS,
        entries: int = CACHE_ENTRIES,
    ) -> None:
        self._max_similar = max_similar
        self._interval = timedelta(seconds=interval)
        self._entries = entries
        self._similar: OrderedDict[SimilarKey, _Similar] = OrderedDict()
        self._posted: OrderedDict[tuple[SimilarKey, str], Occurrence] = OrderedDict()

    def observe(self, key: SimilarKey, message: str, name: str, now: datetime) -> Occurrence:
        """The Event of ``key`` with ``message`` at ``now``: new under ``name``, or the
        count of one posted before."""
        identity = message
        if self._similar_many(key, message, now):
            # One combined Event for them all, its message the latest one's.
            identity, message = COMBINED, COMBINED + message
        last = self._posted.pop((key, identity), None)
        if last is None:
            seen = Occurrence(name, message, 1, now, new=True)
        else:
            seen = Occurrence(last.name, message, last.count + 1, last.first, new=False)
        self._posted[(key, identity)] = seen
        while len(self._posted) > self._entries:
            self._posted.popitem(last=False)
        return seen

    def _similar_many(self, key: SimilarKey, message: str, now: datetime) -> bool:
        """EventAggregate: whether ``key`` has had MAX_SIMILAR messages or more within
        the interval, this one included."""
        similar = self._similar.pop(key, None) or _Similar()
        if similar.last is not None and now - similar.last > self._interval:
            similar = _Similar()
        similar.last = now
        similar.messages.add(message)
        self._similar[key] = similar
        while len(self._similar) > self._entries:
            self._similar.popitem(last=False)
        return len(similar.messages) >= self._max_similar
