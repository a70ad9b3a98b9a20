"""The fitted slopes of the scale harness's cost curves (bench/scale/slopes.py)."""

from __future__ import annotations

import pytest

from bench.scale.slopes import fit_exponent, fit_line, fit_power, table

XS = [600.0, 6_000.0, 30_000.0, 60_000.0, 120_000.0, 180_000.0]


def test_a_line_is_fitted_exactly() -> None:
    line = fit_line(XS, [80 + 0.002 * x for x in XS])
    assert line.slope == pytest.approx(0.002) and line.intercept == pytest.approx(80)
    assert line.error == pytest.approx(0, abs=1e-9)


@pytest.mark.parametrize("k", [0.8, 1.0, 1.3, 2.0])
def test_the_exponent_of_a_term_over_a_constant_is_found(k: float) -> None:
    assert fit_exponent(XS, [80 + 0.01 * x**k for x in XS]) == pytest.approx(k)


def test_a_quadratic_term_is_not_taken_for_a_linear_one() -> None:
    """The control: a linear fit alone would hide it (a slope per object either way)."""
    assert fit_exponent(XS, [80 + 0.001 * x + 1e-8 * x**2 for x in XS]) > 1.2


@pytest.mark.parametrize(("d", "expected"), [(0.0, 0.0), (0.25, 0.25), (-0.1, -0.1)])
def test_a_cost_per_unit_is_fitted_in_log_log(d: float, expected: float) -> None:
    assert fit_power(XS, [2.0 * x**d for x in XS]) == pytest.approx(expected)


def _level(objects: int, rss: float, per_pod: float | None) -> dict[str, object]:
    growth = {"cpu_ms_per_pod": per_pod, "cpu_ms_per_event": per_pod} if per_pod else {}
    return {
        "level": {"objects": objects},
        "rss_steady_mib": rss,
        "cpu_synced_s": objects / 3000,
        "wall_synced_s": objects / 2900,
        "growth": growth,
    }


def test_the_table_has_a_row_per_figure_with_three_levels_or_more() -> None:
    levels = [_level(600, 80, 2.0), _level(6000, 92, 2.0), _level(60000, 200, 2.0)]
    rows = table(levels)
    assert rows[2].startswith("| RSS at rest | 600 / 6,000 / 60,000 | 80 / 92 / 200 MiB |")
    assert "exponent 1.00" in rows[3]
    assert rows[-1].endswith("log-log slope +0.00 |")
    assert len(rows) == 2 + 3 + 2
    assert len(table(levels[:2])) == 2, "two levels are no curve"
