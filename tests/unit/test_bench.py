"""The pure parts of the bench: audit counting, its log cursor, late Events, the statistics,
the arms' objects and the report's columns and targets."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench import report
from bench.__main__ import Run, parse_args
from bench.runner import USERS, Round, calls_per_pod
from bench.scenarios import QUICK
from bench.stats import Spread, percentile, window_rate
from bench.workloads import CONTROLLERS, MANAGED_BY, Arm, job, jobs_path
from tests.support import audit

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
T1 = datetime(2026, 1, 1, 12, 1, 0, tzinfo=UTC)


def event(
    verb: str,
    resource: str,
    *,
    user: str = audit.OPERATOR,
    at: str = "2026-01-01T12:00:30.123456Z",
    stage: str = "ResponseComplete",
    namespace: str = "ns",
    subresource: str | None = None,
) -> str:
    ref = {"resource": resource, "namespace": namespace}
    if subresource:
        ref["subresource"] = subresource
    return json.dumps(
        {
            "kind": "Event",
            "stage": stage,
            "verb": verb,
            "user": {"username": user},
            "objectRef": ref,
            "stageTimestamp": at,
        }
    )


def test_counts_completed_requests_by_user_verb_and_resource() -> None:
    lines = [
        event("create", "pods"),
        event("create", "pods"),
        event("patch", "paralleljobs", subresource="status"),
        event("update", "jobs", subresource="status", user=audit.JOB_CONTROLLER),
        event("watch", "pods", stage="ResponseStarted"),
    ]
    counts = audit.count_events(lines, T0, T1)
    assert counts == {
        audit.CallKey(audit.OPERATOR, "create", "pods"): 2,
        audit.CallKey(audit.OPERATOR, "patch", "paralleljobs/status"): 1,
        audit.CallKey(audit.JOB_CONTROLLER, "update", "jobs/status"): 1,
    }
    assert audit.by_user(counts, audit.OPERATOR) == {
        "create pods": 2,
        "patch paralleljobs/status": 1,
    }


def test_counts_only_the_window_the_users_and_the_namespace_asked_for() -> None:
    lines = [
        event("create", "pods", at="2026-01-01T11:59:59.999999Z"),
        event("create", "pods", at="2026-01-01T12:00:00.000000Z"),
        event("create", "pods", at="2026-01-01T12:01:00.000000Z"),
        event("create", "pods", user=audit.CEILING),
        event("create", "pods", namespace="other"),
    ]
    counts = audit.count_events(lines, T0, T1, users=[audit.OPERATOR], namespace="ns")
    assert counts == {audit.CallKey(audit.OPERATOR, "create", "pods"): 1}


def test_cursor_reads_only_new_lines_across_a_rotation(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text(event("create", "pods") + "\n")
    cursor = audit.AuditCursor(log)
    with log.open("a") as f:
        f.write(event("patch", "pods") + "\n")
    # The API server's rotation: rename (same inode), then a new file.
    os.rename(log, tmp_path / "audit-2026-01-01T12-00-31.000.log")
    log.write_text(event("delete", "pods") + "\n" + event("get", "pods"))  # last line partial
    verbs = [json.loads(line)["verb"] for line in cursor.take()]
    assert verbs == ["patch", "delete"]
    with log.open("a") as f:
        f.write("\n")
    assert [json.loads(line)["verb"] for line in cursor.take()] == ["get"]
    assert cursor.take() == []


def test_percentiles_interpolate_between_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 50) == 2.5
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert Spread.of(values) == Spread(median=2.5, q1=1.75, q3=3.25, max=4.0, n=4)
    with pytest.raises(ValueError):
        percentile([], 50)


def test_window_rate_leaves_out_ramp_up_and_tail() -> None:
    # 11 events: a slow start, ten per second in the middle, a slow tail.
    times = [0.0, 5.0, 5.1, 5.2, 5.3, 5.4, 5.5, 5.6, 5.7, 5.8, 20.0]
    assert window_rate(times) == pytest.approx(8 / 0.8)


def test_calls_per_pod_leave_out_watches() -> None:
    calls = {"create pods": 10, "patch pods": 10, "watch pods": 3}
    assert calls_per_pod(calls, 10) == 2.0
    assert calls_per_pod(calls, 0) is None


def test_a_rounds_late_events_count_once_and_only_events_of_its_controller() -> None:
    r = Round("s2", Arm.BUILTIN, 1, calls={"create pods": 10, "create events": 4})
    r.finished_pods = 10
    r.namespace, r.window_end = "ns", T0
    lines = [
        event("create", "events", user=audit.JOB_CONTROLLER),
        event("create", "events", user=audit.JOB_CONTROLLER, at="2026-01-01T11:59:59.000000Z"),
        event("create", "events", user=audit.JOB_CONTROLLER, namespace="other"),
        event("create", "events", user=audit.OPERATOR),
        event("delete", "pods", user=audit.JOB_CONTROLLER),  # the namespace's deletion
    ]
    r.add_late_events(lines, T1)
    r.add_late_events(lines, T1)
    assert r.calls == {
        "create pods": 10,
        "create events": 4,
        f"create events {audit.AFTER_THE_ROUND}": 1,
    }
    assert r.calls_per_pod == 1.5


# ---------------------------------------------------------------- arms, the report's columns


def test_an_arms_name_is_not_its_kind() -> None:
    assert [a.kind for a in CONTROLLERS] == ["Job", "ParallelJob", "Job"]
    assert Arm("Job-operator") is Arm.OPERATOR_JOB
    assert len({a.slug for a in Arm}) == len(Arm)
    assert jobs_path(Arm.OPERATOR_JOB, "ns", "a") == "/apis/batch/v1/namespaces/ns/jobs/a"
    assert jobs_path(Arm.BUILTIN, "ns") == jobs_path(Arm.OPERATOR_JOB, "ns")
    assert (
        jobs_path(Arm.OPERATOR, "ns") == "/apis/paralleljob.dev/v1alpha1/namespaces/ns/paralleljobs"
    )
    # The operator's Jobs are driven by the operator's identity, as its ParallelJobs.
    assert USERS[Arm.OPERATOR_JOB] == USERS[Arm.OPERATOR] == audit.OPERATOR


def test_only_the_operators_jobs_name_it_in_managed_by() -> None:
    mine = job(Arm.OPERATOR_JOB, "a", completions=3, parallelism=2)
    builtin = job(Arm.BUILTIN, "a", completions=3, parallelism=2)
    assert (mine["apiVersion"], mine["kind"]) == ("batch/v1", "Job")
    assert mine["spec"].pop("managedBy") == MANAGED_BY == "paralleljob.dev/job-controller"
    assert mine == builtin
    pj = job(Arm.OPERATOR, "a", completions=3, parallelism=2)
    assert (pj["kind"], "managedBy" in pj["spec"]) == ("ParallelJob", False)
    assert pj["spec"] == builtin["spec"]


def test_arms_option_accepts_the_job_arm() -> None:
    args = parse_args(["--arms", "Job,Job-operator", "--scenarios", "s1,s3"])
    assert Run(args).arms == {Arm.BUILTIN, Arm.OPERATOR_JOB}
    with pytest.raises(SystemExit):
        parse_args(["--arms", "Job (operator)"])


def _round(scenario: str, arm: Arm, calls_per_pod: float, **metrics: float) -> Round:
    return Round(scenario, arm, 1, metrics=metrics, calls_per_pod=calls_per_pod)


def test_results_table_has_each_operator_arms_ratio_to_the_built_in() -> None:
    rounds = [
        _round("s1", Arm.BUILTIN, 2.0, pods_per_s=10.0, makespan_s=100.0),
        _round("s1", Arm.OPERATOR, 2.1, pods_per_s=50.0, makespan_s=20.0),
        _round("s1", Arm.OPERATOR_JOB, 2.05, pods_per_s=40.0, makespan_s=25.0),
    ]
    header, _, *rows = report.results_table(report.summarize(rounds), QUICK)
    assert header == (
        "| scenario | figure | built-in Job | ParallelJob | ParallelJob / built-in "
        "| Job (operator) | Job (operator) / built-in |"
    )
    assert rows[0].endswith("| pods/s (10-90%) | 10.0 | 50.0 | 5.00x | 40.0 | 4.00x |")
    assert rows[1].endswith("| makespan (s) | 100 | 20.0 | 0.20x | 25.0 | 0.25x |")
    # A run without the Job arm (or the ceiling) keeps the table it always had.
    two = report.summarize(rounds[:2])
    assert report.results_table(two, QUICK)[0].count("/ built-in") == 1


def test_targets_compare_the_job_arm_with_the_built_in_and_with_parallel_jobs() -> None:
    rounds = {
        "defaults": [
            _round("s1", Arm.BUILTIN, 2.0, pods_per_s=10.0, makespan_s=100.0),
            _round("s1", Arm.OPERATOR, 2.1, pods_per_s=50.0, makespan_s=20.0),
            _round("s1", Arm.OPERATOR_JOB, 2.05, pods_per_s=40.0, makespan_s=35.0),
        ]
    }
    summaries = {k: report.summarize(v) for k, v in rounds.items()}
    found = {v.target: v for v in report.verdicts(summaries, rounds, QUICK) if v.met is not None}
    assert found["S1 makespan ≤ 0.3x built-in"].met is True
    assert found["S1 makespan ≤ 0.3x built-in, Job (operator)"].met is False
    assert found["API calls per finished pod ≤ built-in (S1)"].met is False
    assert found["API calls per finished pod ≤ built-in (S1), Job (operator)"].met is False
    assert found["API calls per finished pod ≤ ParallelJob (S1), Job (operator)"].met is True
