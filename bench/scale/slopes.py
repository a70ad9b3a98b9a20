"""``python -m bench.scale.slopes RESULTS.json ...``: the scale harness's cost curves with
their fitted slopes, as docs/benchmark.md shows them (issue 47).

A total (RSS at rest, CPU and wall seconds until every job was synced) is fitted as
``y = a + b * x`` over the objects ``x`` (least squares: ``b`` per 1,000 objects) and as
``y = a + c * x**k`` (the exponent ``k`` of the best fit, searched over 0.5-2.0: 1.0 is
linear, above it a term grows faster). A cost per unit (CPU per pod lifecycle, per
event) is fitted as ``log y = log c + d * log x``: ``d`` near 0 is a constant cost per
unit, its total linear in the units.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The exponents searched for ``y = a + c * x**k``.
EXPONENTS = [k / 100 for k in range(50, 201)]

#: A figure of a level's result: its value, or None where the level lacks it.
Figure = Callable[[dict[str, Any]], float | None]


@dataclass(frozen=True)
class Line:
    intercept: float
    slope: float
    #: The residual sum of squares.
    error: float


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> Line:
    """Least squares ``y = intercept + slope * x`` (two points at least, not all one x)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = my - slope * mx
    error = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    return Line(intercept, slope, error)


def fit_exponent(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The ``k`` of the best ``y = a + c * x**k`` among EXPONENTS."""
    fits = [(fit_line([x**k for x in xs], ys).error, k) for k in EXPONENTS]
    return min(fits)[1]


def fit_power(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The ``d`` of ``y = c * x**d`` (a line in log-log)."""
    return fit_line([math.log(x) for x in xs], [math.log(y) for y in ys]).slope


def _get(*path: str) -> Figure:
    def figure(result: dict[str, Any]) -> float | None:
        value: Any = result
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return float(value) if isinstance(value, int | float) else None

    return figure


#: (name, unit per 1,000 objects, figure): the totals.
TOTALS: list[tuple[str, str, Figure]] = [
    ("RSS at rest", "MiB", _get("rss_steady_mib")),
    ("CPU until every job synced (a restart)", "CPU-s", _get("cpu_synced_s")),
    ("time until every job synced (a restart)", "s", _get("wall_synced_s")),
]
#: (name, unit, figure): the costs per unit.
PER_UNIT: list[tuple[str, str, Figure]] = [
    ("CPU per pod lifecycle (create -> counted)", "ms", _get("growth", "cpu_ms_per_pod")),
    ("CPU per event", "ms", _get("growth", "cpu_ms_per_event")),
]


def points(levels: Sequence[dict[str, Any]], figure: Figure) -> list[tuple[float, float]]:
    """(objects, value) of every level that has the figure, by objects."""
    found = [(float(r["level"]["objects"]), figure(r)) for r in levels if not r.get("error")]
    return sorted((x, y) for x, y in found if y is not None)


def _values(pts: Sequence[tuple[float, float]], unit: str) -> str:
    return " / ".join(f"{y:,.3g}" for _, y in pts) + f" {unit}"


def table(levels: Sequence[dict[str, Any]]) -> list[str]:
    """The markdown table of every figure with its fitted slopes."""
    rows = [
        "| figure | objects | values | fitted |",
        "| --- | --- | --- | --- |",
    ]
    for name, unit, figure in TOTALS:
        pts = points(levels, figure)
        if len(pts) < 3:
            continue
        xs, ys = [x for x, _ in pts], [y for _, y in pts]
        line = fit_line(xs, ys)
        rows.append(
            f"| {name} | {_objects(xs)} | {_values(pts, unit)} | "
            f"{1000 * line.slope:.3g} {unit} per 1,000 objects; exponent "
            f"{fit_exponent(xs, ys):.2f} |"
        )
    for name, unit, figure in PER_UNIT:
        pts = points(levels, figure)
        if len(pts) < 3:
            continue
        xs, ys = [x for x, _ in pts], [y for _, y in pts]
        rows.append(
            f"| {name} | {_objects(xs)} | {_values(pts, unit)} | "
            f"log-log slope {fit_power(xs, ys):+.2f} |"
        )
    return rows


def _objects(xs: Sequence[float]) -> str:
    return " / ".join(f"{int(x):,}" for x in xs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale.slopes", description=__doc__)
    parser.add_argument("results", nargs="+", type=Path, help="bench.scale's .json results")
    args = parser.parse_args(argv)
    levels = [lv for path in args.results for lv in json.loads(path.read_text())["levels"]]
    print("\n".join(table(levels)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
