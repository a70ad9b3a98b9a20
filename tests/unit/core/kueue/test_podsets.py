"""A ParallelJob as Kueue's GenericJob (core/kueue/podsets.py), row by row as Kueue
v0.17.0 tests the Job's (workload_names_test.go, job_controller_test.go,
podset_test.go, reconciler_test.go's EquivalentToWorkload cases)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.core.kueue.podsets import (
    CLUSTER_QUEUE_LABEL,
    JOB_UID_LABEL,
    LOCAL_QUEUE_LABEL,
    MAX_EXEC_TIME_LABEL,
    MIN_PARALLELISM_ANNOTATION,
    PODSET_LABEL,
    WORKLOAD_ANNOTATION,
    JobChange,
    PodSetError,
    PodSetInfo,
    Priority,
    equivalent_to_workload,
    job_pod_sets,
    merge_template,
    new_workload,
    pod_sets_info,
    reclaimable_pods,
    restore_change,
    restore_template,
    semantic,
    start_change,
    workload_name,
)
from paralleljob.core.kueue.workload_model import (
    RESOURCE_IN_USE_FINALIZER,
    PriorityClassRef,
    ResourceFlavor,
)
from tests.unit.core.kueue.builders import (
    ADMITTED,
    FLAVORS,
    SPOT_TOLERATION,
    TEMPLATE,
    UID,
    admission,
    job,
    workload,
)

LONG = (
    "marketing-campaign-autumn-2024-region-north-america-department-digital-strategy-sub-"
    "department-social-media-engagement-tracker-and-analytics-dashboard-v2-final-revision-"
    "by-engineering-team-lead-senior-architect-validation-checked-approved-by-legal-and-ops-dept"
)


# -------------------------------------------------------------------------- the name
@pytest.mark.parametrize(
    ("name", "uid", "kind", "group", "want"),
    [
        pytest.param("name", "uid", "Job", "batch", "job-name-ef3a1", id="upstream vector"),
        pytest.param(
            LONG,
            "uid",
            "Job",
            "batch",
            LONG[: 253 - 6 - len("job-")].join(["job-", "-218b8"]),
            id="upstream vector: prefix cut to 247",
        ),
        pytest.param("demo", "uid", c.KIND, c.GROUP, "paralleljob-demo-9389d", id="a ParallelJob"),
        pytest.param("demo", "uid2", c.KIND, c.GROUP, "paralleljob-demo-68d44", id="another uid"),
    ],
)
def test_workload_name(name: str, uid: str, kind: str, group: str, want: str) -> None:
    got = workload_name(name, uid, kind, group)
    assert got == want and len(got) <= 253


def test_the_version_is_not_in_the_hash() -> None:
    """The hash reads kind and group, not the version: a served version changing keeps
    the name (and "ParallelJob" vs "paralleljob" as written matters)."""
    assert workload_name("demo", "uid") == workload_name("demo", "uid", c.KIND, c.GROUP)
    assert workload_name("demo", "uid") != workload_name("demo", "uid", "paralleljob", c.GROUP)


# ------------------------------------------------------------------------ the PodSet
@pytest.mark.parametrize(
    ("parallelism", "completions", "annotation", "count", "min_count"),
    [
        pytest.param(3, 6, None, 3, None, id="parallelism below completions"),
        pytest.param(5, 2, None, 2, None, id="completions below parallelism: lowered"),
        pytest.param(4, None, None, 4, None, id="no completions"),
        pytest.param(None, None, None, 1, None, id="both unset: 1 (API defaults)"),
        pytest.param(5, 10, "2", 5, 2, id="min-parallelism: partially admissible"),
        pytest.param(5, 10, "two", 5, None, id="min-parallelism not an integer: ignored"),
        pytest.param(0, 10, None, 0, None, id="parallelism 0"),
    ],
)
def test_pod_set_count(
    parallelism: int | None,
    completions: int | None,
    annotation: str | None,
    count: int,
    min_count: int | None,
) -> None:
    annotations = {MIN_PARALLELISM_ANNOTATION: annotation} if annotation else {}
    (ps,) = job_pod_sets(
        job(parallelism=parallelism, completions=completions, annotations=annotations)
    )
    assert (ps.name, ps.count, ps.min_count) == ("main", count, min_count)


def test_pod_set_template_less_the_job_controller_labels() -> None:
    template = copy.deepcopy(TEMPLATE)
    template["metadata"]["labels"].update(
        {
            "job-name": "demo",
            "controller-uid": UID,
            "batch.kubernetes.io/job-name": "demo",
            "batch.kubernetes.io/controller-uid": UID,
            c.LABEL_JOB_NAME: "demo",
            c.LABEL_CONTROLLER_UID: UID,
        }
    )
    queued = job(template=template)
    (ps,) = job_pod_sets(queued)
    assert ps.template["metadata"]["labels"] == {
        "app": "demo",
        "job-name": "demo",
        "batch.kubernetes.io/job-name": "demo",
        c.LABEL_JOB_NAME: "demo",
    }
    assert queued.template == template  # a copy: the job's own is untouched


def test_env_deduplicated_first_place_last_value() -> None:
    template = copy.deepcopy(TEMPLATE)
    template["spec"]["containers"][0]["env"] = [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "2"},
        {"name": "A", "value": "3"},
    ]
    (ps,) = job_pod_sets(job(template=template))
    assert ps.template["spec"]["containers"][0]["env"] == [
        {"name": "A", "value": "3"},
        {"name": "B", "value": "2"},
    ]


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        pytest.param({}, {}, id="none: the index label only"),
        pytest.param(
            {"kueue.x-k8s.io/podset-required-topology": "rack"}, {"required": "rack"}, id="required"
        ),
        pytest.param(
            {
                "kueue.x-k8s.io/podset-required-topology": "rack",
                "kueue.x-k8s.io/podset-preferred-topology": "block",
            },
            {"required": "rack"},
            id="required wins over preferred",
        ),
        pytest.param(
            {"kueue.x-k8s.io/podset-preferred-topology": "block"},
            {"preferred": "block"},
            id="preferred",
        ),
        pytest.param(
            {"kueue.x-k8s.io/podset-unconstrained-topology": "true"},
            {"unconstrained": True},
            id="unconstrained",
        ),
    ],
)
def test_topology_request(annotations: dict[str, str], want: dict[str, Any]) -> None:
    template = copy.deepcopy(TEMPLATE)
    template["metadata"]["annotations"] = annotations
    (ps,) = job_pod_sets(job(template=template))
    assert ps.topology_request == {**want, "podIndexLabel": f"{c.GROUP}/job-completion-index"}


# ------------------------------------------------------------------ reclaimable pods
@pytest.mark.parametrize(
    ("parallelism", "completions", "succeeded", "want"),
    [
        pytest.param(1, 6, 3, (), id="one pod at a time: never"),
        pytest.param(3, 6, 0, (), id="none succeeded yet"),
        pytest.param(3, 6, 3, (), id="3 remaining fill parallelism 3"),
        pytest.param(3, 6, 4, (("main", 1),), id="2 remaining of parallelism 3: 1 slot"),
        pytest.param(3, 6, 5, (("main", 2),), id="1 remaining: 2 slots"),
        pytest.param(3, 6, 6, (("main", 3),), id="all done: all slots"),
        pytest.param(3, None, 1, (("main", 1),), id="no completions: parallelism's"),
        pytest.param(4, 2, 1, (("main", 3),), id="completions below parallelism"),
    ],
)
def test_reclaimable_pods(
    parallelism: int, completions: int | None, succeeded: int, want: tuple[tuple[str, int], ...]
) -> None:
    queued = job(parallelism=parallelism, completions=completions, status={"succeeded": succeeded})
    assert reclaimable_pods(queued) == want


# ---------------------------------------------------------------------- the Workload
def test_new_workload() -> None:
    queued = job(annotations={"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "60", "other": "x"})
    body = new_workload(
        queued, Priority(100, PriorityClassRef("kueue.x-k8s.io", "WorkloadPriorityClass", "high"))
    )
    assert body["apiVersion"] == "kueue.x-k8s.io/v1beta2" and body["kind"] == "Workload"
    meta = body["metadata"]
    assert meta["name"] == workload_name("demo", UID) and meta["namespace"] == "ns"
    assert meta["labels"] == {JOB_UID_LABEL: UID}
    assert meta["finalizers"] == [RESOURCE_IN_USE_FINALIZER]
    assert meta["annotations"] == {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "60"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "paralleljob.dev/v1alpha1",
            "kind": "ParallelJob",
            "name": "demo",
            "uid": UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    spec = body["spec"]
    assert spec["queueName"] == "lq"
    assert spec["priority"] == 100
    assert spec["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "high",
    }
    assert [ps["count"] for ps in spec["podSets"]] == [3]
    assert "maximumExecutionTimeSeconds" not in spec and "active" not in spec


@pytest.mark.parametrize(
    ("label", "want"),
    [
        pytest.param("30", 30, id="30"),
        pytest.param("0", None, id="0: none"),
        pytest.param("-5", None, id="negative: none"),
        pytest.param("soon", None, id="not a number: none"),
        pytest.param("2147483648", None, id="beyond int32: none"),
    ],
)
def test_maximum_execution_time(label: str, want: int | None) -> None:
    spec = new_workload(job(labels={MAX_EXEC_TIME_LABEL: label}), Priority())["spec"]
    assert spec.get("maximumExecutionTimeSeconds") == want
    assert spec["priority"] == 0 and "priorityClassRef" not in spec


# ---------------------------------------------------------------------- pod-set infos
def test_infos_from_admission() -> None:
    wl = workload(
        conditions=ADMITTED,
        admitted_with=admission(
            {"cpu": "spot", "memory": "spot", "nvidia.com/gpu": "gpu"}, count=2
        ),
    )
    (info,) = pod_sets_info(wl, FLAVORS)  # type: ignore[misc]
    assert info.count == 2
    assert info.node_selector == {"pool": "spot", "zone": "a", "accelerator": "a100"}
    assert info.tolerations == (SPOT_TOLERATION,)  # spot counted once
    assert info.labels == {PODSET_LABEL: "main", LOCAL_QUEUE_LABEL: "lq", CLUSTER_QUEUE_LABEL: "cq"}
    assert info.annotations == {WORKLOAD_ANNOTATION: wl.name}


@pytest.mark.parametrize(
    ("cq", "labelled"),
    [
        pytest.param("team-a", True, id="a DNS label"),
        pytest.param("Team_A", False, id="not a DNS label: no label"),
        pytest.param("a" * 64, False, id="64 characters: no label"),
    ],
)
def test_cluster_queue_label(cq: str, labelled: bool) -> None:
    wl = workload(conditions=ADMITTED, admitted_with=admission(cq=cq))
    (info,) = pod_sets_info(wl, FLAVORS)  # type: ignore[misc]
    assert (CLUSTER_QUEUE_LABEL in info.labels) == labelled


def test_count_from_the_pod_set_without_one_admitted() -> None:
    wl = workload(conditions=ADMITTED, admitted_with=admission())
    (info,) = pod_sets_info(wl, FLAVORS)  # type: ignore[misc]
    assert info.count == 3


def test_admission_check_updates_merged() -> None:
    checks = [
        {
            "name": "prov",
            "state": "Ready",
            "podSetUpdates": [
                {
                    "name": "main",
                    "labels": {"x": "1"},
                    "nodeSelector": {"pool": "on-demand"},
                    "tolerations": [SPOT_TOLERATION],
                }
            ],
        }
    ]
    wl = workload(conditions=ADMITTED, admitted_with=admission(), checks=checks)
    (info,) = pod_sets_info(wl, FLAVORS)  # type: ignore[misc]
    assert info.labels["x"] == "1" and info.node_selector == {"pool": "on-demand"}
    assert info.tolerations == (SPOT_TOLERATION,)


def test_admission_check_conflicting_with_the_flavor() -> None:
    checks = [
        {
            "name": "prov",
            "state": "Ready",
            "podSetUpdates": [{"name": "main", "nodeSelector": {"pool": "x"}}],
        }
    ]
    wl = workload(conditions=ADMITTED, admitted_with=admission(), checks=checks)
    assert pod_sets_info(wl, FLAVORS) == PodSetError(
        'in admission check "prov": invalid admission check PodSetUpdate: conflict for '
        "nodeSelector: conflict for key=pool, value1=on-demand, value2=x"
    )


def test_missing_flavor_is_retried() -> None:
    wl = workload(conditions=ADMITTED, admitted_with=admission({"cpu": "gone"}))
    error = pod_sets_info(wl, FLAVORS)
    assert isinstance(error, PodSetError) and not error.permanent
    assert error.message == 'resourceflavors.kueue.x-k8s.io "gone" not found'


def test_topology_assignment_gates_the_pods() -> None:
    assigned = admission()
    assigned["podSetAssignments"][0]["topologyAssignment"] = {"levels": ["rack"]}
    wl = workload(conditions=ADMITTED, admitted_with=assigned)
    (info,) = pod_sets_info(wl, FLAVORS)  # type: ignore[misc]
    assert info.scheduling_gates == ({"name": "kueue.x-k8s.io/topology"},)
    # The PodSet asks for no topology of its own: unconstrained.
    assert info.annotations["kueue.x-k8s.io/podset-unconstrained-topology"] == "true"


# ------------------------------------------------------------------- merge, restore
def _info(**fields: Any) -> PodSetInfo:
    return PodSetInfo(**{"name": "main", "count": 3, **fields})


CONFLICT = "invalid admission check PodSetUpdate: conflict for "


@dataclass(frozen=True)
class MergeCase:
    template: dict[str, Any]
    info: PodSetInfo
    error: str = ""


MERGE_CASES = [
    pytest.param(
        MergeCase(
            {"metadata": {"labels": {"a": "1"}}, "spec": {}},
            _info(labels={"a": "2"}),
            CONFLICT + "labels: conflict for key=a, value1=1, value2=2",
        ),
        id="label conflict",
    ),
    pytest.param(
        MergeCase(
            {"spec": {"nodeSelector": {"pool": "x"}}},
            _info(node_selector={"pool": "on-demand"}),
            CONFLICT + "nodeSelector: conflict for key=pool, value1=x, value2=on-demand",
        ),
        id="nodeSelector conflict",
    ),
    pytest.param(
        MergeCase(
            {"metadata": {"annotations": {"k": "v"}}, "spec": {}},
            _info(annotations={"k": "w"}),
            CONFLICT + "annotations: conflict for key=k, value1=v, value2=w",
        ),
        id="annotation conflict",
    ),
    pytest.param(
        MergeCase(
            {"spec": {"nodeSelector": {"pool": "on-demand"}}},
            _info(node_selector={"pool": "on-demand"}),
        ),
        id="the same value: no conflict",
    ),
]


@pytest.mark.parametrize("case", MERGE_CASES)
def test_merge_conflicts(case: MergeCase) -> None:
    merged = merge_template(case.template, case.info)
    if case.error:
        assert merged == PodSetError(case.error)
    else:
        assert not isinstance(merged, PodSetError)


def test_merge_adds_and_does_not_duplicate_tolerations() -> None:
    template = {"spec": {"tolerations": [SPOT_TOLERATION], "containers": []}}
    info = _info(
        labels={"l": "1"},
        node_selector={"pool": "spot"},
        tolerations=(SPOT_TOLERATION, {"key": "gpu", "operator": "Exists"}),
    )
    merged = merge_template(template, info)
    assert merged == {
        "metadata": {"labels": {"l": "1"}},
        "spec": {
            "tolerations": [SPOT_TOLERATION, {"key": "gpu", "operator": "Exists"}],
            "containers": [],
            "nodeSelector": {"pool": "spot"},
        },
    }


def test_restore_undoes_the_merge_keeping_controller_labels() -> None:
    wl = workload(conditions=ADMITTED, admitted_with=admission({"cpu": "spot"}))
    (info,) = pod_sets_info(wl, FLAVORS)  # type: ignore[misc]
    merged = merge_template(TEMPLATE, info)
    assert isinstance(merged, dict) and merged["spec"]["nodeSelector"] == {
        "pool": "spot",
        "zone": "a",
    }
    merged["metadata"]["labels"][c.LABEL_CONTROLLER_UID] = UID  # put there by someone since
    restored = restore_template(merged, wl.pod_sets[0])
    want = copy.deepcopy(TEMPLATE)
    want["metadata"]["labels"][c.LABEL_CONTROLLER_UID] = UID
    assert restored == want


def test_start_partial_admission() -> None:
    queued = job(parallelism=5, completions=10, annotations={MIN_PARALLELISM_ANNOTATION: "2"})
    change = start_change(queued, [_info(count=2)])
    assert isinstance(change, JobChange)
    assert (change.suspend, change.parallelism, change.completions) == (False, 2, None)


def test_start_completions_follow_parallelism() -> None:
    annotations = {
        MIN_PARALLELISM_ANNOTATION: "2",
        "kueue.x-k8s.io/job-completions-equal-parallelism": "true",
    }
    change = start_change(
        job(parallelism=5, completions=5, annotations=annotations), [_info(count=4)]
    )
    assert isinstance(change, JobChange) and (change.parallelism, change.completions) == (4, 4)


def test_start_without_min_count_keeps_parallelism() -> None:
    change = start_change(job(parallelism=5), [_info(count=2)])
    assert isinstance(change, JobChange) and change.parallelism is None


def test_start_with_no_info_is_permanent() -> None:
    assert start_change(job(), []) == PodSetError("invalid podset infos: expecting 0 podset, got 1")


def test_restore_partial_admission_count() -> None:
    annotations = {MIN_PARALLELISM_ANNOTATION: "2"}
    wl = workload(job(parallelism=5, completions=10, annotations=annotations))
    change = restore_change(job(parallelism=2, completions=10, annotations=annotations), wl)
    assert (change.parallelism, change.template) == (5, None)
    assert restore_change(job(parallelism=2), None) == JobChange()


# ----------------------------------------------------------------------- equivalence
@dataclass(frozen=True)
class EquivCase:
    job_kwargs: dict[str, Any]
    wl_conditions: tuple[dict[str, Any], ...] = ()
    admitted_count: int | None = None
    want: bool = True
    wl_job_kwargs: dict[str, Any] | None = None


EQUIV_CASES = [
    pytest.param(EquivCase({}), id="the job's own Workload, pending"),
    pytest.param(EquivCase({"suspend": False}, ADMITTED), id="admitted and running"),
    pytest.param(EquivCase({"parallelism": 4}, want=False), id="parallelism changed, pending: not"),
    pytest.param(
        EquivCase({"parallelism": 4, "suspend": False}, ADMITTED, want=False),
        id="parallelism changed while admitted: not (evict + recreate)",
    ),
    pytest.param(
        EquivCase(
            {"parallelism": 2, "suspend": False, "annotations": {MIN_PARALLELISM_ANNOTATION: "1"}},
            ADMITTED,
            admitted_count=2,
            wl_job_kwargs={"parallelism": 3, "annotations": {MIN_PARALLELISM_ANNOTATION: "1"}},
        ),
        id="partially admitted, running the admitted count",
    ),
    pytest.param(
        EquivCase({"labels": {MAX_EXEC_TIME_LABEL: "60"}}, want=False),
        id="max execution time added: not",
    ),
    pytest.param(
        EquivCase({"completions": 3}), id="completions changed above the count: same count"
    ),
    pytest.param(
        EquivCase({"completions": 2}, want=False), id="completions below parallelism: count 2"
    ),
]


@pytest.mark.parametrize("case", EQUIV_CASES)
def test_equivalent_to_workload(case: EquivCase) -> None:
    wl = workload(
        job(**(case.wl_job_kwargs or {})),
        conditions=case.wl_conditions,
        admitted_with=admission(count=case.admitted_count) if case.wl_conditions else None,
    )
    assert equivalent_to_workload(job(**case.job_kwargs), wl, FLAVORS) is case.want


def test_another_owner_is_not_equivalent() -> None:
    assert not equivalent_to_workload(job(), workload(job(), ownerReferences=[]), FLAVORS)


def test_tolerations_count_only_until_admitted() -> None:
    template = copy.deepcopy(TEMPLATE)
    template["spec"]["tolerations"] = [SPOT_TOLERATION]
    pending = workload(job())
    admitted = workload(job(), conditions=ADMITTED, admitted_with=admission())
    assert not equivalent_to_workload(job(template=template), pending, FLAVORS)
    assert equivalent_to_workload(job(template=template, suspend=False), admitted, FLAVORS)


def test_containers_compared_as_go_sees_them() -> None:
    """The Workload's copy went through Kueue's webhook and CRD: quantities canonical,
    protocol TCP defaulted, empty fields dropped. Still the same containers."""
    stored = copy.deepcopy(TEMPLATE)
    stored["spec"]["containers"][0].update(
        resources={"requests": {"cpu": "0.5"}}, ports=[{"containerPort": 8080, "protocol": "TCP"}]
    )
    wl = workload(job(template=stored))
    written = copy.deepcopy(TEMPLATE)
    written["spec"]["containers"][0]["imagePullPolicy"] = ""
    assert equivalent_to_workload(job(template=written), wl, FLAVORS)
    more = copy.deepcopy(TEMPLATE)
    more["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    assert not equivalent_to_workload(job(template=more), wl, FLAVORS)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        pytest.param(
            {"requests": {"memory": "1Gi"}}, {"requests": {"memory": "1073741824"}}, True, id="1Gi"
        ),
        pytest.param({"requests": {"cpu": "100m"}}, {"requests": {"cpu": "0.1"}}, True, id="100m"),
        pytest.param({"requests": {"cpu": "1k"}}, {"requests": {"cpu": "1e3"}}, True, id="1k"),
        pytest.param({"requests": {"cpu": "1"}}, {"requests": {"cpu": "2"}}, False, id="1 vs 2"),
        pytest.param({"x": [], "y": None}, {}, True, id="empty and null as absent"),
    ],
)
def test_semantic(a: dict[str, Any], b: dict[str, Any], same: bool) -> None:
    assert (semantic(a) == semantic(b)) is same


def test_flavor_without_node_labels() -> None:
    flavors = {"on-demand": ResourceFlavor("on-demand")}
    wl = workload(conditions=ADMITTED, admitted_with=admission())
    (info,) = pod_sets_info(wl, flavors)  # type: ignore[misc]
    assert info.node_selector == {} and info.tolerations == ()
