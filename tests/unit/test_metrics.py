"""The pure parts of metrics.py: label values and the finalizer transition counter."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from paralleljob import metrics

JOBS = "/apis/paralleljob.dev/v1alpha1/namespaces/ns/paralleljobs"


@pytest.mark.parametrize(
    ("path", "resource"),
    [
        ("/api/v1/namespaces/ns/pods", "pods"),
        ("/api/v1/namespaces/ns/pods/p-1", "pods"),
        ("/api/v1/namespaces/ns/events", "events"),
        ("/apis/paralleljob.dev/v1alpha1/namespaces/ns/paralleljobs/j", "paralleljobs"),
        (
            "/apis/paralleljob.dev/v1alpha1/namespaces/ns/paralleljobs/j/status",
            "paralleljobs/status",
        ),
        ("/api/v1/namespaces/ns", "namespaces"),
        ("/api/v1/namespaces/ns/pods?watch=true", "pods"),
        ("/version", "other"),
        ("/apis/paralleljob.dev/v1alpha1", "other"),
    ],
)
def test_resource_of_a_request_path(path: str, resource: str) -> None:
    assert metrics.resource_of(path) == resource


@pytest.mark.parametrize(
    ("created", "deleted", "managed", "action"),
    [
        (3, 0, True, "pods_created"),
        (0, 2, True, "pods_deleted"),
        (0, 0, True, "tracking"),
        (0, 0, False, "reconciling"),
    ],
)
def test_sync_action_label(created: int, deleted: int, managed: bool, action: str) -> None:
    assert metrics.sync_action(created, deleted, managed) == action


def _finalizer_events(event: str) -> float:
    name = "paralleljob_controller_terminated_pods_tracking_finalizer_total"
    return REGISTRY.get_sample_value(name, {"event": event}) or 0.0


def test_finished_pods_with_finalizer_are_counted_on_entering_and_leaving() -> None:
    added, deleted = _finalizer_events("add"), _finalizer_events("delete")
    state = metrics.FinishedWithFinalizer()
    state.observe("p-1", False)  # running
    state.observe("p-1", True)  # succeeded, finalizer on
    state.observe("p-1", True)  # another event in the same state
    state.observe("p-2", True)
    state.observe("p-1", False)  # finalizer removed
    assert _finalizer_events("add") - added == 2
    assert _finalizer_events("delete") - deleted == 1
