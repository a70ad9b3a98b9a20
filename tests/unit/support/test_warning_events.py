"""unexpected_warnings: what tests/e2e fails a test on, from an EventList as kubectl lists it."""

from __future__ import annotations

from typing import Any

from tests.support.warning_events import WarningEvent, describe, unexpected_warnings


def _event(type_: str, reason: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": type_,
        "reason": reason,
        "involvedObject": {"kind": "ParallelJob", "name": "job"},
        "message": f"{reason} happened",
        "count": 1,
        **extra,
    }


def test_a_warning_not_expected_is_reported_an_expected_one_is_not() -> None:
    events = {
        "items": [
            _event("Warning", "BackoffLimitExceeded"),
            _event("Warning", "UnexpectedJob", count=3),
        ]
    }
    found = unexpected_warnings(events, {"BackoffLimitExceeded"})
    assert found == [
        WarningEvent("UnexpectedJob", "ParallelJob", "job", "UnexpectedJob happened", 3)
    ]


def test_with_nothing_expected_every_warning_is_reported() -> None:
    events = {"items": [_event("Warning", "FailedCreate"), _event("Warning", "BackOff")]}
    assert [w.reason for w in unexpected_warnings(events, ())] == ["FailedCreate", "BackOff"]


def test_normal_events_are_ignored_whatever_their_reason() -> None:
    events = {"items": [_event("Normal", "Completed"), _event("Normal", "FailedCreate")]}
    assert unexpected_warnings(events, ()) == []
    assert unexpected_warnings({"items": []}, ()) == []
    assert unexpected_warnings({"items": None}, ()) == []


def test_an_event_of_events_k8s_io_counts_its_series() -> None:
    event = _event("Warning", "FailedScheduling", series={"count": 4})
    del event["count"]
    [found] = unexpected_warnings({"items": [event]}, ())
    assert found.count == 4


def test_the_message_names_each_warning_and_how_to_declare_one() -> None:
    found = unexpected_warnings({"items": [_event("Warning", "MissSchedule", count=2)]}, ())
    text = describe("pj-test-1", found, {"Failed", "BackOff"})
    assert "1 unexpected Warning Event(s) in namespace pj-test-1" in text
    assert "(expected reasons: BackOff, Failed)" in text
    assert '@pytest.mark.warnings("Reason", ...)' in text
    assert text.splitlines()[-1] == "  MissSchedule: ParallelJob/job (x2): MissSchedule happened"


def test_the_kubelet_s_token_volume_mount_retry_on_a_busy_machine_is_tolerated() -> None:
    busy = (
        'MountVolume.SetUp failed for volume "kube-api-access-v976q" : '
        "failed to sync configmap cache: timed out waiting for the condition"
    )
    other = 'MountVolume.SetUp failed for volume "data" : configmap "settings" not found'
    events = {
        "items": [
            _event("Warning", "FailedMount", message=busy),
            _event("Warning", "FailedMount", message=other),
        ]
    }
    # Only that message: a volume of the test's own that fails to mount still fails it.
    assert [w.message for w in unexpected_warnings(events, ())] == [other]


def test_the_node_authorizer_lagging_the_binding_of_a_pod_is_tolerated() -> None:
    lagging = (
        'MountVolume.SetUp failed for volume "kube-api-access-ldtxc" : failed to fetch '
        'token: serviceaccounts "default" is forbidden: node requested token bound to a '
        "pod scheduled on a different node"
    )
    refused = (
        'MountVolume.SetUp failed for volume "kube-api-access-ldtxc" : failed to fetch '
        'token: serviceaccounts "builder" not found'
    )
    events = {
        "items": [
            _event("Warning", "FailedMount", message=lagging),
            _event("Warning", "FailedMount", message=refused),
        ]
    }
    assert [w.message for w in unexpected_warnings(events, ())] == [refused]


def _warning(reason: str, kind: str, name: str, message: str) -> dict[str, Any]:
    return {
        "type": "Warning",
        "reason": reason,
        "involvedObject": {"kind": kind, "name": name},
        "message": message,
        "count": 1,
    }


def test_a_readiness_probe_failing_while_its_container_starts_is_tolerated() -> None:
    def unhealthy(message: str) -> dict[str, Any]:
        return _warning("Unhealthy", "Pod", "redis-1", message)

    ready = "Readiness probe failed: Could not connect to Redis at 127.0.0.1:6379: refused"
    live = "Liveness probe failed: Could not connect to Redis at 127.0.0.1:6379: refused"
    events = {"items": [unhealthy(ready), unhealthy(live)]}
    assert [w.message for w in unexpected_warnings(events, ())] == [live]


def test_keda_cancelling_its_own_job_create_on_teardown_is_tolerated() -> None:
    def failed(message: str) -> dict[str, Any]:
        return _warning("KEDAJobCreateFailed", "ScaledJob", "workqueue-scaledjob", message)

    cancelled = (
        "Failed to create job workqueue-scaledjob-: client rate limiter Wait returned an "
        "error: context canceled"
    )
    in_flight = (
        "Failed to create job workqueue-scaledjob-: Post "
        '"https://10.96.0.1:443/apis/batch/v1/namespaces/pj-test-6756596f/jobs": context canceled'
    )
    refused = 'Failed to create job workqueue-scaledjob-: jobs.batch is forbidden: User "x"'
    events = {"items": [failed(cancelled), failed(in_flight), failed(refused)]}
    assert [w.message for w in unexpected_warnings(events, ())] == [refused]
