"""Ordered intervals of completion indexes: upstream's ``orderedIntervals`` value type.

Ports the interval half of ``pkg/controller/job/indexed_job_utils.go`` (Kubernetes
v1.37.2): ``interval``, ``orderedIntervals`` and ``parseIndexesFromString``. It is a
value type that Indexed jobs, the success policy, the back-off, tracking and the metrics
read, so it sits below them all. What differs: ordered intervals are immutable tuples of
``(first, last)`` pairs, and the methods of upstream's ``orderedIntervals`` are functions
(``intervals_string``, ``intervals_has``, ``intervals_total``, ``with_ordered_indexes``,
``merge_intervals``). Upstream's nil and empty lists are both ``()``.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable
from typing import TypeAlias

from .model import atoi

log = logging.getLogger(__name__)

#: A run of completion indexes, first and last included (upstream ``interval``).
Interval: TypeAlias = tuple[int, int]
#: Intervals in increasing order, neither overlapping nor adjacent (``orderedIntervals``).
OrderedIntervals: TypeAlias = tuple[Interval, ...]


def _parse_interval(text: str, completions: int) -> Interval | None:
    """One "a" or "a-b" of parseIndexesFromString, its last index capped below
    ``completions``; None if it cannot be parsed. A first index at or above
    ``completions`` is returned as is: the caller stops there."""
    limits = text.split("-")
    first = atoi(limits[0])
    if first is None:
        return None
    if first >= completions or len(limits) == 1:
        return first, first
    # Like upstream, "a-b-c" reads as "a-b", and "5-3" is kept as it is.
    last = atoi(limits[1])
    if last is None:
        return None
    return first, min(last, completions - 1)


def parse_indexes_from_string(
    indexes: str, completions: int, job_name: str = ""
) -> OrderedIntervals:
    """parseIndexesFromString: "1,3-5,7" as ordered intervals below ``completions``.

    Adjacent intervals merge; corrupted ones are skipped (and logged, as upstream does);
    parsing stops at the first interval that starts at or above ``completions``, and the
    last interval is cut at ``completions - 1``. ``job_name`` only names the job in the
    log line.
    """
    if indexes == "":
        return ()
    result: list[Interval] = []
    for text in indexes.split(","):
        interval = _parse_interval(text, completions)
        if interval is None:
            log.info("Corrupted indexes interval, ignoring: job=%s interval=%r", job_name, text)
            continue
        first, last = interval
        if first >= completions:
            break
        if result and result[-1][1] == first - 1:
            result[-1] = (result[-1][0], last)
        else:
            result.append((first, last))
    return tuple(result)


def intervals_string(intervals: OrderedIntervals) -> str:
    """orderedIntervals.String: "0,2-4,6,7" (two adjacent indexes print as "6,7")."""
    parts: list[str] = []
    for first, last in intervals:
        if last <= first:
            parts.append(str(first))
        elif last == first + 1:
            parts.append(f"{first},{last}")
        else:
            parts.append(f"{first}-{last}")
    return ",".join(parts)


def intervals_has(intervals: OrderedIntervals, index: int) -> bool:
    """orderedIntervals.has: a binary search for the first interval ending at or after
    ``index``, which holds it if it starts at or before it."""
    at = bisect.bisect_left(intervals, index, key=lambda interval: interval[1])
    return at < len(intervals) and intervals[at][0] <= index


def intervals_total(intervals: Iterable[Interval]) -> int:
    """orderedIntervals.total: how many indexes the intervals hold."""
    return sum(last - first + 1 for first, last in intervals)


def merge_intervals(intervals: OrderedIntervals, new: OrderedIntervals) -> OrderedIntervals:
    """orderedIntervals.merge: both ordered lists as one, overlapping or adjacent
    intervals joined."""
    result: list[Interval] = []

    def append_or_merge(interval: Interval) -> None:
        # appendOrMergeWithLastInterval.
        if not result or interval[0] > result[-1][1] + 1:
            result.append(interval)
        elif result[-1][1] < interval[1]:
            result[-1] = (result[-1][0], interval[1])

    i = j = 0
    while i < len(intervals) and j < len(new):
        if intervals[i][0] < new[j][0]:
            append_or_merge(intervals[i])
            i += 1
        else:
            append_or_merge(new[j])
            j += 1
    for interval in intervals[i:]:
        append_or_merge(interval)
    for interval in new[j:]:
        append_or_merge(interval)
    return tuple(result)


def with_ordered_indexes(
    intervals: OrderedIntervals, new_indexes: Iterable[int]
) -> OrderedIntervals:
    """orderedIntervals.withOrderedIndexes: the intervals with ``new_indexes`` (given in
    increasing order) added."""
    return merge_intervals(intervals, tuple((ix, ix) for ix in new_indexes))
