"""A histogram read from Prometheus' text format (the operator's /metrics), and what its
buckets say of the largest observation. Pure."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LE = re.compile(r'le="(?P<le>[^"]+)"')


@dataclass(frozen=True)
class Histogram:
    #: (upper bound, cumulative count), ascending, +Inf last.
    buckets: tuple[tuple[float, float], ...]
    total: float
    count: float

    def minus(self, earlier: Histogram | None) -> Histogram:
        """The observations made since ``earlier`` (a scrape of the same histogram)."""
        if earlier is None:
            return self
        before = dict(earlier.buckets)
        return Histogram(
            tuple((le, n - before.get(le, 0.0)) for le, n in self.buckets),
            self.total - earlier.total,
            self.count - earlier.count,
        )

    def max_range(self) -> tuple[float, float] | None:
        """The bounds (low, high] of the bucket holding the largest observation; None
        when nothing was observed. A histogram keeps no maximum: this is as close as
        its buckets say."""
        low = 0.0
        previous = 0.0
        found: tuple[float, float] | None = None
        for le, cumulative in self.buckets:
            if cumulative > previous:
                found = (low, le)
            previous, low = cumulative, le
        return found

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


def parse_histogram(text: str, name: str) -> Histogram | None:
    """The histogram ``name`` (no labels but ``le``) in a scrape; None if absent."""
    buckets: list[tuple[float, float]] = []
    total = count = None
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None:
            continue
        sample, value = m["name"], float(m["value"])
        if sample == f"{name}_bucket":
            le = _LE.search(m["labels"] or "")
            if le is not None:
                buckets.append((math.inf if le["le"] == "+Inf" else float(le["le"]), value))
        elif sample == f"{name}_sum":
            total = value
        elif sample == f"{name}_count":
            count = value
    if not buckets or total is None or count is None:
        return None
    return Histogram(tuple(sorted(buckets)), total, count)
