"""Ordered intervals of completion indexes (``core/job/intervals.py``), as upstream tests
them (pkg/controller/job/indexed_job_utils_test.go at Kubernetes v1.34.4:
TestIntervalsHaveIndex) and through the functions that read them."""

from __future__ import annotations

import logging

import pytest

from paralleljob.core.job.intervals import (
    OrderedIntervals,
    intervals_has,
    intervals_string,
    intervals_total,
    merge_intervals,
    parse_indexes_from_string,
    with_ordered_indexes,
)


# ------------------------------------------------------------------ TestIntervalsHaveIndex
@pytest.mark.parametrize(
    ("intervals", "index", "want_has"),
    [
        pytest.param((), 4, False, id="empty"),
        pytest.param(((2, 4), (5, 7)), 1, False, id="before all"),
        pytest.param(((2, 4), (6, 8)), 9, False, id="after all"),
        pytest.param(((2, 4), (6, 8)), 5, False, id="in between"),
        pytest.param(((2, 4), (6, 8)), 2, True, id="in first"),
        pytest.param(((2, 4), (6, 8)), 8, True, id="in second"),
    ],
)
def test_intervals_have_index(intervals: OrderedIntervals, index: int, want_has: bool) -> None:
    """Ports TestIntervalsHaveIndex."""
    assert intervals_has(intervals, index) is want_has


# ------------------------------------------------------------- not upstream: the rest
@pytest.mark.parametrize(
    ("text", "completions", "want"),
    [
        pytest.param("", 5, (), id="empty"),
        pytest.param("1,3-5,7", 10, ((1, 1), (3, 5), (7, 7)), id="mixed"),
        pytest.param("0,1", 5, ((0, 1),), id="adjacent singles merge"),
        pytest.param("0-2,3-4,6", 10, ((0, 4), (6, 6)), id="adjacent intervals merge"),
        pytest.param("0-499", 500, ((0, 499),), id="one interval"),
        pytest.param("2-9", 5, ((2, 4),), id="last cut at completions"),
        pytest.param("1,7,2", 5, ((1, 1),), id="stops at the first out of range"),
        pytest.param("-1,2", 5, ((2, 2),), id="negative skipped"),
        pytest.param("1-2-3", 5, ((1, 2),), id="extra limit ignored"),
    ],
)
def test_parse_indexes_from_string(text: str, completions: int, want: OrderedIntervals) -> None:
    """parseIndexesFromString (upstream tests it through TestCalculateSucceededIndexes)."""
    assert parse_indexes_from_string(text, completions) == want


@pytest.mark.parametrize(
    ("intervals", "want"),
    [
        pytest.param((), "", id="empty"),
        pytest.param(((1, 1),), "1", id="one"),
        pytest.param(((0, 1),), "0,1", id="two adjacent print as a list"),
        pytest.param(((0, 2), (4, 4), (6, 7)), "0-2,4,6,7", id="mixed"),
        pytest.param(((0, 4), (6, 6)), "0-4,6", id="interval and one"),
    ],
)
def test_intervals_string(intervals: OrderedIntervals, want: str) -> None:
    """orderedIntervals.String, on status strings upstream's TestTrackJobStatusAndRemoveFinalizers
    expects; they parse back to the same intervals."""
    assert intervals_string(intervals) == want
    assert parse_indexes_from_string(want, 1000) == intervals


@pytest.mark.parametrize(
    ("left", "right", "want"),
    [
        pytest.param((), (), (), id="both empty"),
        pytest.param(((1, 2),), (), ((1, 2),), id="right empty"),
        pytest.param(((0, 1),), ((2, 3),), ((0, 3),), id="adjacent"),
        pytest.param(((0, 5),), ((2, 3),), ((0, 5),), id="contained"),
        pytest.param(
            ((0, 2), (8, 9)), ((4, 5), (6, 6)), ((0, 2), (4, 6), (8, 9)), id="interleaved"
        ),
        pytest.param(((3, 4),), ((3, 7),), ((3, 7),), id="same first"),
    ],
)
def test_merge_intervals(
    left: OrderedIntervals, right: OrderedIntervals, want: OrderedIntervals
) -> None:
    assert merge_intervals(left, right) == want
    assert merge_intervals(right, left) == want
    assert intervals_total(want) == sum(b - a + 1 for a, b in want)


def test_with_ordered_indexes() -> None:
    assert with_ordered_indexes(((2, 3),), [0, 1, 4, 9]) == ((0, 4), (9, 9))
    assert intervals_total(((0, 4), (9, 9))) == 6


def test_a_corrupted_interval_is_skipped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    """parseIndexesFromString logs a corrupted interval with the job's name and goes on."""
    with caplog.at_level(logging.INFO, logger="paralleljob.core.job.intervals"):
        assert parse_indexes_from_string("0,1-foo,bar,3", 4, "myjob") == ((0, 0), (3, 3))
    assert "job=myjob interval='1-foo'" in caplog.text
    assert "job=myjob interval='bar'" in caplog.text


def test_a_reversed_interval_is_kept_as_upstream_keeps_it() -> None:
    """Upstream does not check that first <= last: "5-3" is the interval (5, 3), which
    holds no index and prints as "5"."""
    assert parse_indexes_from_string("5-3", 10) == ((5, 3),)
    assert intervals_string(((5, 3),)) == "5"
    assert not intervals_has(((5, 3),), 4)


@pytest.mark.parametrize(
    ("intervals", "want"),
    [
        pytest.param((), 0, id="empty"),
        pytest.param(((3, 3),), 1, id="one index"),
        pytest.param(((0, 4), (9, 9)), 6, id="an interval and one index"),
    ],
)
def test_intervals_total(intervals: OrderedIntervals, want: int) -> None:
    """orderedIntervals.total."""
    assert intervals_total(intervals) == want
