"""The local cluster's API server audit log (hack/cluster/audit-policy.yaml), which
`make bench` counts API calls with, records the job controller's requests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import KWOK_TOLERATION, REPO_ROOT
from tests.support import audit
from tests.support.wait import wait_until

AUDIT_LOG = REPO_ROOT / ".cluster" / "logs" / "audit.log"


@pytest.mark.localcluster
@pytest.mark.kwok
def test_audit_log_records_the_job_controllers_pod_creation(
    api_client: Any, namespace: str
) -> None:
    from kubernetes import client

    cursor = audit.AuditCursor(AUDIT_LOG)
    since = datetime.now(UTC) - timedelta(seconds=1)
    pod_spec = {
        "restartPolicy": "Never",
        "nodeSelector": {"type": "kwok"},
        "tolerations": [KWOK_TOLERATION],
        "containers": [{"name": "main", "image": "busybox:1.35.0"}],
    }
    batch_v1: Any = client.BatchV1Api(api_client)
    batch_v1.create_namespaced_job(
        namespace,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "audited"},
            "spec": {"template": {"metadata": {}, "spec": pod_spec}},
        },
    )

    def pod_creations() -> int:
        counts = audit.count_events(
            cursor.lines(),
            since,
            datetime.now(UTC) + timedelta(seconds=1),
            users=[audit.JOB_CONTROLLER],
            namespace=namespace,
        )
        return counts[audit.CallKey(audit.JOB_CONTROLLER, "create", "pods")]

    assert wait_until(pod_creations, timeout=60, what="the job controller's pod creation") == 1
