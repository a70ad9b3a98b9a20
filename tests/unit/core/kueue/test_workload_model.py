"""The Workload and ResourceFlavor values (core/kueue/workload_model.py): parsing, and
apimeta.SetStatusCondition's rules as Kueue relies on them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from paralleljob.core.kueue.workload_model import (
    Admission,
    PodSetAssignment,
    WorkloadCondition,
    condition_to_dict,
    parse_resource_flavor,
    parse_workload,
    set_condition,
    truncate_condition_message,
)
from tests.unit.core.kueue.builders import SPOT_TOLERATION, T0

BODY = {
    "metadata": {
        "name": "paralleljob-demo-9389d",
        "namespace": "ns",
        "generation": 3,
        "finalizers": ["kueue.x-k8s.io/resource-in-use"],
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Other", "name": "x", "uid": "1"},
            {
                "apiVersion": "paralleljob.dev/v1alpha1",
                "kind": "ParallelJob",
                "name": "demo",
                "uid": "2",
                "controller": True,
            },
        ],
    },
    "spec": {
        "queueName": "lq",
        "podSets": [{"name": "main", "count": 5, "minCount": 2, "template": {"spec": {}}}],
        "priorityClassRef": {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": "high",
        },
        "priority": 100,
        "active": False,
    },
    "status": {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "lastTransitionTime": "2026-01-01T11:00:00Z",
            }
        ],
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {"cpu": "spot"},
                    "count": 3,
                    "resourceUsage": {"cpu": "3"},
                }
            ],
        },
        "reclaimablePods": [{"name": "main", "count": 1}],
        "accumulatedPastExecutionTimeSeconds": 30,
    },
}


def test_parse_workload() -> None:
    wl = parse_workload(BODY)
    assert wl.key == "ns/paralleljob-demo-9389d" and wl.generation == 3
    assert wl.controller is not None and wl.controller.name == "demo"
    assert wl.pod_sets[0].min_count == 2 and wl.can_be_partially_admitted
    assert wl.has_quota_reservation and not wl.is_admitted and not wl.is_finished
    assert wl.admission == Admission("cq", (PodSetAssignment("main", {"cpu": "spot"}, 3),))
    assert wl.active is False and wl.priority == 100
    assert wl.reclaimable_pods[0].count == 1 and wl.accumulated_past_execution_time_seconds == 30


def test_parse_resource_flavor() -> None:
    flavor = parse_resource_flavor(
        {
            "metadata": {"name": "spot"},
            "spec": {
                "nodeLabels": {"pool": "spot"},
                "tolerations": [SPOT_TOLERATION],
                "nodeTaints": [SPOT_TOLERATION],
            },
        }
    )
    assert (flavor.name, dict(flavor.node_labels), flavor.tolerations) == (
        "spot",
        {"pool": "spot"},
        (SPOT_TOLERATION,),
    )


OLD = WorkloadCondition("Requeued", "True", "Preempted", "m", T0 - timedelta(hours=1), 1)


@pytest.mark.parametrize(
    ("new", "changed", "moved"),
    [
        pytest.param(
            WorkloadCondition("Requeued", "True", "Preempted", "m", None, 1),
            False,
            False,
            id="same: no change",
        ),
        pytest.param(
            WorkloadCondition("Requeued", "True", "Other", "m", None, 1),
            True,
            False,
            id="reason only: time kept",
        ),
        pytest.param(
            WorkloadCondition("Requeued", "True", "Preempted", "m", None, 2),
            True,
            False,
            id="generation only",
        ),
        pytest.param(
            WorkloadCondition("Requeued", "False", "Preempted", "m", None, 1),
            True,
            True,
            id="status: time moves",
        ),
    ],
)
def test_set_condition(new: WorkloadCondition, changed: bool, moved: bool) -> None:
    conditions, did = set_condition((OLD,), new, T0)
    assert did is changed and len(conditions) == 1
    assert conditions[0].last_transition_time == (T0 if moved else OLD.last_transition_time)
    assert conditions[0].reason == new.reason


def test_set_condition_appends_a_new_type_at_now() -> None:
    conditions, did = set_condition(
        (OLD,), WorkloadCondition("Finished", "True", "Succeeded"), T0.replace(microsecond=5)
    )
    assert did and conditions[1].last_transition_time == T0 and conditions[0] is OLD


def test_condition_json_and_truncation() -> None:
    assert condition_to_dict(OLD) == {
        "type": "Requeued",
        "status": "True",
        "reason": "Preempted",
        "message": "m",
        "lastTransitionTime": "2026-01-01T11:00:00Z",
        "observedGeneration": 1,
    }
    long = "é" * 20000  # 40000 bytes
    cut = truncate_condition_message(long)
    assert len(cut.encode()) <= 32 * 1024 and cut.endswith(" ...")
    assert truncate_condition_message("short") == "short"
