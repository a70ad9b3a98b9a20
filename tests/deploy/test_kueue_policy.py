"""A ParallelJob labelled for a Kueue queue is created suspended (manifests/kueue-policy.yaml),
as Kueue's webhook creates a batch/v1 Job it queues: the API server's own mutation, no
Kueue installed. Each create is a server-side dry run (admission runs on it; nothing is
created)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.wait import wait_until

from .conftest import Kubectl, parallel_job

pytestmark = [pytest.mark.cluster]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def _job(name: str, *, queue: str | None = None, suspend: bool | None = None) -> dict[str, Any]:
    job = parallel_job(name)
    if queue is not None:
        job["metadata"]["labels"] = {QUEUE_LABEL: queue}
    if suspend is not None:
        job["spec"]["suspend"] = suspend
    return job


def _created(kubectl: Kubectl, namespace: str, job: dict[str, Any]) -> dict[str, Any]:
    """The ParallelJob as the API server would store it."""
    out = kubectl.run(
        "-n", namespace, "create", "--dry-run=server", "-o", "json", "-f", "-",
        input=json.dumps(job),
    )  # fmt: skip
    created: dict[str, Any] = json.loads(out.stdout)
    return created


def _labelled_and_suspended(kubectl: Kubectl, namespace: str) -> dict[str, Any] | None:
    """A ParallelJob labelled for a queue as created, once it comes back suspended."""
    created = _created(kubectl, namespace, _job("queued", queue="q"))
    return created if created["spec"].get("suspend") is True else None


@pytest.fixture
def labelled(deployed: Kubectl, watched: str) -> dict[str, Any]:
    """The first labelled ParallelJob that came back suspended: the API server applies a
    policy once its informer has it, moments after the deploy applied it."""
    return wait_until(
        lambda: _labelled_and_suspended(deployed, watched),
        timeout=30,
        what="a ParallelJob labelled for a queue created suspended",
    )


def test_a_job_labelled_for_a_queue_is_created_suspended(labelled: dict[str, Any]) -> None:
    assert labelled["metadata"]["labels"] == {QUEUE_LABEL: "q"}
    # The rest of its spec as the user wrote it.
    assert (labelled["spec"]["parallelism"], labelled["spec"]["completions"]) == (2, 3)


def test_an_explicit_suspend_false_is_overridden(
    deployed: Kubectl, watched: str, labelled: dict[str, Any]
) -> None:
    """As Kueue's webhook suspends a Job whatever its spec said: the queue decides."""
    job = _created(deployed, watched, _job("queued-not-suspended", queue="q", suspend=False))
    assert job["spec"]["suspend"] is True


@pytest.mark.parametrize(
    ("labels", "suspend"),
    [({}, None), ({}, False), ({"team": "a"}, None), ({QUEUE_LABEL: ""}, None)],
    ids=["unlabelled", "unlabelled-suspend-false", "other-label", "empty-queue-name"],
)
def test_a_job_for_no_queue_is_left_alone(
    deployed: Kubectl,
    watched: str,
    labelled: dict[str, Any],
    labels: dict[str, str],
    suspend: bool | None,
) -> None:
    """No queue named (an empty name is none, as Kueue reads it): not suspended, while
    the policy is in effect (``labelled``)."""
    job = _job("unqueued", suspend=suspend)
    if labels:
        job["metadata"]["labels"] = labels
    created = _created(deployed, watched, job)
    assert not created["spec"].get("suspend"), created["spec"]
