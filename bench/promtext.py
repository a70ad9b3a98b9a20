"""The operator's and kube-controller-manager's /metrics, read from Prometheus' text
format: samples by name and labels, sums, and histograms and what their buckets say of
the longest observation (a histogram keeps no maximum). Pure.

The operator's pause histograms (operator/paralleljob/runtime/metrics.py) are named here
for both benchmarks that scrape them: scenario 8 (curve.py) and the scale harness
(scale/run.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

#: Every event-loop lag sample: how late a timer of the loop fired.
LOOP_LAG = "paralleljob_controller_event_loop_lag_seconds"
#: The part of each lag sample the operator's own work caused (the rest is its thread
#: waiting for a CPU).
LOOP_BLOCKED = "paralleljob_controller_event_loop_blocked_seconds"
#: Every full collection of the cyclic GC.
FULL_GC = "paralleljob_controller_gc_full_collection_seconds"
#: The part of each full collection the operator's own computing took.
FULL_GC_BLOCKED = "paralleljob_controller_gc_full_collection_blocked_seconds"

Samples = dict[str, list[tuple[dict[str, str], float]]]


def parse_metrics(text: str) -> Samples:
    """Prometheus' text format (prometheus_client's parser): name -> [(labels, value)]."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return out


def total(samples: Samples, metric: str, **labels: str) -> float | None:
    """The sum of ``metric``'s samples whose labels include ``labels``; None if absent."""
    values = [
        v
        for have, v in samples.get(metric, [])
        if all(have.get(k) == want for k, want in labels.items())
    ]
    return sum(values) if values else None


def buckets(samples: Samples, histogram: str) -> dict[float, float]:
    """A histogram's cumulative counts by upper bound (``le``; +Inf as math.inf)."""
    out: dict[float, float] = {}
    for labels, value in samples.get(f"{histogram}_bucket", []):
        bound = math.inf if labels.get("le") == "+Inf" else float(labels["le"])
        out[bound] = out.get(bound, 0.0) + value
    return out


def longest_observation(before: Mapping[float, float], after: Mapping[float, float]) -> float:
    """The upper bound of the highest bucket that gained an observation between two
    scrapes of a histogram (math.inf: above its last bound; 0.0: none)."""
    gained = {b: after.get(b, 0.0) - before.get(b, 0.0) for b in after}
    everything = gained.get(math.inf, 0.0)
    if everything <= 0:
        return 0.0
    return min(b for b, n in gained.items() if n >= everything)


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
        when nothing was observed."""
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
    samples = parse_metrics(text)
    found = buckets(samples, name)
    total_, count = total(samples, f"{name}_sum"), total(samples, f"{name}_count")
    if not found or total_ is None or count is None:
        return None
    return Histogram(tuple(sorted(found.items())), total_, count)
