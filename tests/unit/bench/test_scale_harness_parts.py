"""The harness's pure parts: the loop-lag histogram read from /metrics, and the report."""

from __future__ import annotations

import json
import math
import random

import pytest

from bench.promtext import parse_histogram
from bench.scale import report, run

# -- metrics ----------------------------------------------------------------------------------
SCRAPE = """# HELP lag x
# TYPE lag histogram
lag_bucket{le="0.01"} 5.0
lag_bucket{le="0.1"} 7.0
lag_bucket{le="1.0"} 8.0
lag_bucket{le="+Inf"} 8.0
lag_count 8.0
lag_sum 0.6
"""


def test_the_largest_observation_is_known_to_its_bucket() -> None:
    hist = parse_histogram(SCRAPE, "lag")
    assert hist is not None
    assert hist.max_range() == (0.1, 1.0)
    assert hist.mean == pytest.approx(0.075)
    later = parse_histogram(
        SCRAPE.replace('"+Inf"} 8.0', '"+Inf"} 9.0').replace("count 8.0", "count 9.0"), "lag"
    )
    assert later is not None
    since = later.minus(hist)
    assert since.count == 1 and since.max_range() == (1.0, math.inf)
    assert parse_histogram(SCRAPE, "other") is None


def _level(objects_: int, cpu: float) -> dict[str, object]:
    return {
        "level": {"jobs": objects_ // 6, "pods_per_job": 5, "objects": objects_},
        "mode": "plain",
        "synced": True,
        "wall_synced_s": cpu,
        "cpu_synced_s": cpu,
        "probes": {"created": 50, "with_first_pod": 50, "first_pod_after_watch": {"p50_ms": 5.0}},
    }


def test_the_report_says_how_startup_cpu_grows() -> None:
    levels = [_level(600, 1.0), _level(6000, 100.0)]
    assert report.growth(levels) == [
        "- 600 → 6,000 objects: CPU until synced 1.0 → 100.0 s, CPU ∝ objects^2.00"
    ]
    run = {
        "label": "t",
        "date": "2026-12-01",
        "command": "python -m bench.scale",
        "commit": "abc",
        "machine": {"cpus": "2", "cpu_model": "x", "memory_gib": "1"},
        "python": "3.11",
        "leader_elect": False,
        "levels": json.loads(json.dumps(levels)),
    }
    text = report.render(run)
    assert "| 6,000 (1,000 x 5) | plain |" in text
    assert "| 600 | 50 of 50 | 5.0 ms |" in text


def test_the_report_shows_a_growth_with_its_pauses_by_bucket() -> None:
    level = _level(6000, 10.0) | {
        "growth": {
            "jobs": 4000,
            "rate_per_s": 50.0,
            "created_s": 80.2,
            "pods_created": 20000,
            "pods_created_s": 81.0,
            "complete_s": 95.0,
            "cpu_s": 40.5,
            "cpu_ms_per_pod": 2.025,
            "events": 100000,
            "cpu_ms_per_event": 0.405,
            "rss_before_mib": 110.0,
            "rss_after_mib": 190.5,
            "longest_ms": {
                "lag": [250.0, 500.0],
                "own": [50.0, 100.0],
                "full_gc": [100.0, 250.0],
                "full_gc_own": [50.0, 100.0],
            },
        }
    }
    rows = report._growth_rows([level, _level(600, 1.0)])
    assert rows[2:] == [
        "| 1,000 | 4,000 at 50/s | 20,000 | 80.2 s | 81.0 s | 95.0 s | 40.5 s | 2.02 ms "
        "| 100,000 | 0.405 ms | 110.0 MiB → 190.5 MiB "
        "| 250-500 ms | 50-100 ms | 100-250 ms | 50-100 ms |"
    ]


def test_a_seeded_job_s_pods_get_distinct_names(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = iter(["bbbbb", "bbbbb", "ccccc"])
    monkeypatch.setattr(random, "choices", lambda letters, k: list(next(drawn)))
    assert run._pod_names("scale-00001", 2) == ["scale-00001-bbbbb", "scale-00001-ccccc"]
