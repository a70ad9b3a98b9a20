"""The bench's arithmetic: percentiles, medians with IQR, steady-state rates. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), linear between the closest ranks (numpy's
    default), of a non-empty sequence."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class Spread:
    """Median and interquartile range of one metric over rounds."""

    median: float
    q1: float
    q3: float
    #: The largest value: what a peak (memory) is judged by.
    max: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        return cls(
            percentile(values, 50),
            percentile(values, 25),
            percentile(values, 75),
            max(values),
            len(values),
        )


def window_rate(times: Sequence[float], low: float = 0.1, high: float = 0.9) -> float:
    """Events per second between the ``low`` and ``high`` fractions of them (sorted
    event times): the steady-state rate, without the ramp-up and the tail."""
    if len(times) < 2:
        raise ValueError("a rate needs at least two events")
    ordered = sorted(times)
    first = round(low * (len(ordered) - 1))
    last = round(high * (len(ordered) - 1))
    if last <= first:
        first, last = 0, len(ordered) - 1
    if ordered[last] <= ordered[first]:
        # Events received in one watch chunk share a time: fall back to the full span.
        first, last = 0, len(ordered) - 1
    elapsed = ordered[last] - ordered[first]
    if elapsed <= 0:
        raise ValueError("every event was received at the same time")
    return (last - first) / elapsed


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator``, or None when either is missing or the divisor is 0."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator
