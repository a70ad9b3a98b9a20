"""Scenario 8's pure parts: the controllers' metrics text, the longest loop pause from a
histogram's buckets, the "every job synced" criteria, success-to-status, its tables."""

from __future__ import annotations

import math
import time
from typing import Any

from bench import curve, promtext, report
from bench.__main__ import Run, parse_args
from bench.observer import Observer
from bench.runner import Round
from bench.scenarios import QUICK
from bench.workloads import Arm

OPERATOR_TEXT = """\
# HELP paralleljob_controller_jobs ParallelJobs the operator runs a sync loop for
# TYPE paralleljob_controller_jobs gauge
paralleljob_controller_jobs 1000.0
paralleljob_controller_jobs_pending_sync 0.0
paralleljob_controller_job_syncs_total{action="reconciling",result="success"} 900.0
paralleljob_controller_job_syncs_total{action="pods_created",result="success"} 150.0
paralleljob_controller_event_loop_lag_seconds_bucket{le="0.001"} 10.0
paralleljob_controller_event_loop_lag_seconds_bucket{le="0.01"} 12.0
paralleljob_controller_event_loop_lag_seconds_bucket{le="0.1"} 14.0
paralleljob_controller_event_loop_lag_seconds_bucket{le="+Inf"} 14.0
"""


def test_metrics_text_sums_the_samples_whose_labels_match() -> None:
    samples = promtext.parse_metrics(OPERATOR_TEXT)
    assert promtext.total(samples, "paralleljob_controller_jobs") == 1000
    assert promtext.total(samples, "paralleljob_controller_job_syncs_total") == 1050
    assert (
        promtext.total(samples, "paralleljob_controller_job_syncs_total", action="pods_created")
        == 150
    )
    assert promtext.total(samples, "absent") is None
    text = 'workqueue_depth{name="job",note="a,b"} 3\nworkqueue_depth{name="other"} 7\n'
    kcm = promtext.parse_metrics(text)
    assert promtext.total(kcm, "workqueue_depth", name="job") == 3
    assert kcm["workqueue_depth"][0][0]["note"] == "a,b"


def test_longest_pause_is_the_highest_bucket_that_gained_an_observation() -> None:
    after = promtext.buckets(promtext.parse_metrics(OPERATOR_TEXT), promtext.LOOP_LAG)
    assert after == {0.001: 10, 0.01: 12, 0.1: 14, math.inf: 14}
    assert promtext.longest_observation({}, after) == 0.1
    before = {0.001: 10, 0.01: 12, 0.1: 13, math.inf: 13}
    assert promtext.longest_observation(before, after) == 0.1
    before = {0.001: 10, 0.01: 11, 0.1: 13, math.inf: 13}
    assert promtext.longest_observation(before, after) == 0.01
    before = {0.001: 9, 0.01: 11, 0.1: 13, math.inf: 13}
    assert promtext.longest_observation(before, after) == 0.001
    assert promtext.longest_observation(after, after) == 0.0
    assert promtext.longest_observation(after, {**after, math.inf: 15}) == math.inf


def test_synced_once_every_job_was_handed_to_a_sync_and_the_queue_is_empty() -> None:
    samples = promtext.parse_metrics(OPERATOR_TEXT)
    assert curve.operator_synced(samples, 1000)
    assert not curve.operator_synced(samples, 1001)
    busy = promtext.parse_metrics(OPERATOR_TEXT.replace("pending_sync 0.0", "pending_sync 3.0"))
    assert not curve.operator_synced(busy, 1000)
    kcm = promtext.parse_metrics(
        'workqueue_adds_total{name="job"} 1002\nworkqueue_depth{name="job"} 0\n'
    )
    assert curve.kcm_synced(kcm, 1000)
    assert not curve.kcm_synced(kcm, 2000)
    queued = promtext.parse_metrics(
        'workqueue_adds_total{name="job"} 1002\nworkqueue_depth{name="job"} 5\n'
    )
    assert not curve.kcm_synced(queued, 1000)
    assert not curve.kcm_synced({}, 1)


def _job(uid: str, *, ready: int = 0, succeeded: int = 0, parallelism: int = 5) -> dict[str, Any]:
    return {
        "metadata": {"uid": uid, "name": uid},
        "spec": {"parallelism": parallelism},
        "status": {"ready": ready, "succeeded": succeeded},
    }


def _pod(uid: str, owner: str, phase: str) -> dict[str, Any]:
    refs = [{"uid": owner, "controller": True}]
    return {"metadata": {"uid": uid, "ownerReferences": refs}, "status": {"phase": phase}}


def test_a_job_is_steady_once_its_status_shows_every_pod_ready() -> None:
    seen = Observer(None, "/pods", "/jobs")  # type: ignore[arg-type]
    seen._on_job(_job("a", ready=1), 1.0)
    assert (seen.ready, seen.all_ready) == (1, 0)
    seen._on_job(_job("a", ready=5), 2.0)
    seen._on_job(_job("a", ready=5), 3.0)
    assert (seen.ready, seen.all_ready) == (1, 1)
    assert seen.jobs["a"].all_ready == 2.0


def test_success_to_status_is_the_jobs_first_succeeded_count_after_its_pod() -> None:
    seen = Observer(None, "/pods", "/jobs")  # type: ignore[arg-type]
    seen._on_job(_job("a", parallelism=1), 1.0)
    seen._on_job(_job("b", parallelism=1), 1.0)
    seen._on_pod(_pod("p", "a", "Running"), 1.1)
    seen._on_pod(_pod("p", "a", "Succeeded"), 2.0)
    seen._on_job(_job("a", succeeded=1, parallelism=1), 2.25)
    seen._on_pod(_pod("q", "b", "Succeeded"), 3.0)  # its status not yet written
    assert curve.success_to_status(seen) == [0.25]


def test_s8_levels_option_picks_the_levels() -> None:
    args = parse_args(["--scenarios", "s8", "--s8-levels", "5000,1000"])
    run = Run(args)
    assert run.sizes.curve_levels == (1000, 5000)
    assert run.curve_arms == [Arm.OPERATOR, Arm.BUILTIN]
    assert Run(parse_args(["--quick"])).sizes.curve_levels == QUICK.curve_levels


def test_curve_tables_have_a_row_per_level_and_arm_and_the_restart() -> None:
    level = Round(
        "s8-100", Arm.OPERATOR, 1, metrics={"live_objects": 600, "first_pod_p50_ms": 12.0}
    )
    level.usage = {"operator": {"cpu_seconds": 1.5, "peak_rss_mb": 80.0}}
    builtin = Round("s8-100", Arm.BUILTIN, 1, metrics={"live_objects": 600})
    restart = Round(
        "s8-restart", Arm.OPERATOR, 1, metrics={"level_jobs": 100, "leader_after_kill_s": 9.5}
    )
    lines = report.curve_tables([level, builtin, restart], QUICK)
    rows = [line for line in lines if line.startswith("| 100 |")]
    assert rows[0].startswith("| 100 | built-in Job | 600 |")
    assert rows[1].startswith("| 100 | ParallelJob | 600 |")
    assert "| 1.50 |" in rows[1] and "| 12.0 |" in rows[1]
    assert "n/a" in rows[0]
    assert any(line.startswith("| ParallelJob | 100 | 9.50 |") for line in lines)
    assert report.curve_tables([], QUICK) == []


def test_curve_targets_take_the_top_level_and_the_restart() -> None:
    def level(n: int, arm: Arm, **metrics: float) -> Round:
        return Round(f"s8-{n}", arm, 1, metrics=dict(metrics))

    rounds = {
        "defaults": [
            level(100, Arm.OPERATOR, controller_rss_mb=90.0, loop_pause_max_ms=250.0),
            level(1000, Arm.OPERATOR, controller_rss_mb=120.0, loop_pause_max_ms=50.0),
            level(1000, Arm.BUILTIN, controller_rss_mb=200.0),
            Round(
                "s8-restart", Arm.OPERATOR, 1, metrics={"level_jobs": 1000, "relist_rss_ratio": 2.0}
            ),
        ]
    }
    summaries = {k: report.summarize(v) for k, v in rounds.items()}
    found = {v.target: v for v in report.verdicts(summaries, rounds, QUICK)}
    assert found["S8 operator RSS ≤ kube-controller-manager's, at 1,000 jobs"].met is True
    assert found["S8 no event-loop pause over 100 ms at any level"].met is False
    assert found["S8 first pod p50 < 50 ms, at 1,000 jobs"].met is None
    assert found["S8 restart: peak RSS relisting < 1.5x steady, at 1,000 jobs"].met is False


def _level(n: int, **metrics: float) -> Round:
    return Round(f"s8-{n}", Arm.OPERATOR, 1, metrics=dict(metrics))


def _pause_verdict(*levels: Round) -> report.Verdict:
    rounds = {"defaults": list(levels)}
    summaries = {k: report.summarize(v) for k, v in rounds.items()}
    found = {v.target: v for v in report.verdicts(summaries, rounds, QUICK)}
    return found["S8 no event-loop pause over 100 ms at any level"]


def test_the_pause_target_judges_the_operators_own_pauses_where_measured() -> None:
    verdict = _pause_verdict(
        _level(100, loop_pause_max_ms=250.0, loop_blocked_max_ms=50.0, gc_full_max_ms=25.0),
        _level(1000, loop_pause_max_ms=1000.0, loop_blocked_max_ms=100.0),
    )
    assert verdict.met is True
    assert verdict.observed == (
        "the operator's own ≤ 100 ms, the whole lag ≤ 1000 ms, full GC ≤ 25 ms (bucket bounds)"
    )


def test_the_pause_target_counts_a_full_gcs_own_part() -> None:
    verdict = _pause_verdict(
        _level(
            1000,
            loop_pause_max_ms=250.0,
            loop_blocked_max_ms=50.0,
            gc_full_max_ms=250.0,
            gc_full_blocked_max_ms=250.0,
        )
    )
    assert verdict.met is False
    assert verdict.observed == (
        "the operator's own ≤ 50 ms, the whole lag ≤ 250 ms, full GC ≤ 250 ms "
        "(its own part ≤ 250 ms) (bucket bounds)"
    )


def test_rss_per_pod_is_the_growth_from_the_lowest_level_to_the_top() -> None:
    def level(n: int, rss: float) -> Round:
        metrics = {"controller_rss_mb": rss, "live_objects": n * 6.0, "level_jobs": float(n)}
        return Round(f"s8-{n}", Arm.OPERATOR, 1, metrics=metrics)

    def verdict(*levels: Round) -> report.Verdict:
        rounds = {"defaults": list(levels)}
        summaries = {k: report.summarize(v) for k, v in rounds.items()}
        found = {v.target: v for v in report.verdicts(summaries, rounds, QUICK)}
        return found["S8 operator RSS ≤ 4 KiB per pod above the lowest level"]

    # 9,000 more jobs x 5 pods: 45,000 pods in 90 MiB, 2.05 KiB each.
    met = verdict(level(10000, 200.0), level(1000, 110.0))
    assert met.met is True and met.observed == "2.05 KiB per pod, 1,000 → 10,000 jobs"
    assert verdict(level(1000, 110.0), level(10000, 310.0)).met is False  # 4.55 KiB
    assert verdict(level(1000, 110.0)).met is None


def test_each_pause_histograms_longest_observation_is_its_figure() -> None:
    before = {promtext.LOOP_LAG: {0.1: 1.0, math.inf: 1.0}}
    after = {
        promtext.LOOP_LAG: {0.1: 1.0, 1.0: 2.0, math.inf: 2.0},
        "paralleljob_controller_event_loop_blocked_seconds": {0.05: 3.0, math.inf: 3.0},
        "paralleljob_controller_gc_full_collection_seconds": {},
    }
    assert curve.longest_pauses(before, after) == {
        "loop_pause_max_ms": 1000.0,
        "loop_blocked_max_ms": 50.0,
    }


def test_the_background_is_quiet_once_no_pod_changed_for_the_window() -> None:
    seen = Observer(None, "/pods", "/jobs")  # type: ignore[arg-type]
    now = time.monotonic()
    seen._on_pod(_pod("p", "a", "Running"), now - 40)
    seen._on_job(_job("a", ready=5), now)  # a status refresh: not the cluster's churn
    assert seen.pods_quiet_for(30)
    seen._on_pod(_pod("p", "a", "Running"), now)
    assert not seen.pods_quiet_for(30)
    assert seen.pod_changes == 2
