"""The pure parts of the bench: audit counting, its log cursor, late Events, and the statistics."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench import audit
from bench.runner import Round, calls_per_pod
from bench.stats import Spread, percentile, window_rate
from bench.workloads import Arm

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
