"""Kueue queues a ParallelJob as one Workload, as it queues a Job (issue 46): the same
scenario on a batch/v1 Job (Kueue's own Job integration, the oracle) and on a
ParallelJob (the operator's Workload controller), side by side, each arm in queues of
its own with the same quota: a ClusterQueue of 1 CPU on a flavor whose node labels and
toleration put pods on the kwok node (the templates name no node: what places the pods
is what the admission injected).

It runs where Kueue is installed with the operator's configuration (``make kueue``;
``make test-kueue`` runs it); anywhere else it is skipped. The operator's
MutatingAdmissionPolicy (manifests/kueue-policy.yaml) is applied here as the install
applies it: it suspends a labelled ParallelJob on create, as Kueue's webhook does a Job.

What is compared: each Workload's sequence of QuotaReserved, Admitted, Evicted and
Finished transitions; the admitted flavor and count; the pods' node selector and
tolerations; the jobs' final counts; and the order in which the jobs were admitted. The
scenarios: quota full then freed, preemption by priority and re-admission, deletion
while queued and while running, partial admission, quota freed as pods finish,
parallelism raised while admitted;
and (the operator's arm alone) a
ParallelCronJob's run queued as its template says.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from paralleljob.core.cron.cron_model import TRIGGER_ANNOTATION
from tests.support.background import Background
from tests.support.wait import wait_until

from .conftest import Operator
from .support import KWOK_TOLERATION, Kubectl, api_client, kubectl

pytestmark = [pytest.mark.kwok]

REPO = Path(__file__).resolve().parents[2]
POLICY = REPO / "manifests" / "kueue-policy.yaml"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
KWOK_NODE = {"paralleljob.dev/node-type": "kwok"}
TRACKED = ("QuotaReserved", "Admitted", "Evicted", "Finished")
ARMS = ("job", "pj")


@pytest.fixture(scope="module", autouse=True)
def kueue_installed(kubeconfig: str) -> None:
    if kubectl("get", "crd", "workloads.kueue.x-k8s.io", check=False).returncode != 0:
        pytest.skip("Kueue is not installed: make test-kueue runs this with Kueue installed")
    kubectl("apply", "--server-side", "-f", str(POLICY))
    wait_until(_policy_in_effect, timeout=60, what="the policy suspending a queued ParallelJob")


def _policy_in_effect() -> bool:
    """A labelled ParallelJob's server-side dry-run comes back suspended (a new policy
    takes a moment to reach the API server's admission)."""
    body = {
        "apiVersion": "paralleljob.dev/v1alpha1",
        "kind": "ParallelJob",
        "metadata": {"name": "probe", "namespace": "default", "labels": {QUEUE_LABEL: "q"}},
        "spec": {"template": _template("1s")},
    }
    out = kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(body))
    return bool(json.loads(out.stdout)["spec"].get("suspend"))


def _apply(*objects: dict[str, Any]) -> None:
    kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps({"kind": "List", "apiVersion": "v1", "items": list(objects)}),
    )


@pytest.fixture
def queues(namespace: str) -> Iterator[dict[str, str]]:
    """A LocalQueue per arm, each on a ClusterQueue of its own with 1 CPU of a flavor of
    its own (preemption within the queue by priority); two WorkloadPriorityClasses."""
    made: list[tuple[str, str]] = []
    local = {}
    for arm in ARMS:
        flavor, cq = f"kwok-{namespace}-{arm}", f"cq-{namespace}-{arm}"
        _apply(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": flavor},
                "spec": {"nodeLabels": KWOK_NODE, "tolerations": [KWOK_TOLERATION]},
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": cq},
                "spec": {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": namespace}
                    },
                    "preemption": {"withinClusterQueue": "LowerPriority"},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {
                                    "name": flavor,
                                    "resources": [{"name": "cpu", "nominalQuota": "1"}],
                                }
                            ],
                        }
                    ],
                },
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": f"lq-{arm}", "namespace": namespace},
                "spec": {"clusterQueue": cq},
            },
        )
        made += [("resourceflavor", flavor), ("clusterqueue", cq)]
        local[arm] = f"lq-{arm}"
    for name, value in (("low", 10), ("high", 1000)):
        _apply(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": f"{name}-{namespace}"},
                "value": value,
            }
        )
        made.append(("workloadpriorityclass", f"{name}-{namespace}"))
    try:
        yield local
    finally:
        kubectl("delete", "workloads", "--all", "-n", namespace, "--wait=false", check=False)
        for kind, name in made:
            kubectl("delete", kind, name, "--wait=false", "--ignore-not-found", check=False)


@dataclass
class WorkloadLog(Background):
    """Each Workload's transitions of the TRACKED conditions, by its owner's name, and
    the order in which the owners were first admitted."""

    namespace: str
    transitions: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    admitted: list[str] = field(default_factory=list)
    flavors: dict[str, set[str]] = field(default_factory=dict)
    #: Every transition of every owner's Workloads, in the order seen.
    sequence: list[tuple[str, str, str]] = field(default_factory=list)
    #: The most pods each owner's Workloads reported reclaimable.
    reclaimable: dict[str, int] = field(default_factory=dict)
    _seen: dict[str, dict[str, str]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _run(self) -> None:
        api = client.CustomObjectsApi(api_client())
        while not self._stop.is_set():
            for event in watch.Watch().stream(
                api.list_namespaced_custom_object,
                "kueue.x-k8s.io", "v1beta2", self.namespace, "workloads",
                timeout_seconds=2,
            ):  # fmt: skip
                self._record(event["object"])

    def _record(self, wl: dict[str, Any]) -> None:
        owners = wl["metadata"].get("ownerReferences") or [{}]
        owner = str(owners[0].get("name", wl["metadata"]["name"]))
        with self._lock:
            seen = self._seen.setdefault(wl["metadata"]["uid"], {})
            for cond in (wl.get("status") or {}).get("conditions") or []:
                ctype, status = cond["type"], cond["status"]
                if ctype in TRACKED and seen.get(ctype) != status:
                    seen[ctype] = status
                    self.transitions.setdefault(owner, []).append(
                        (ctype, status, cond.get("reason", ""))
                    )
                    self.sequence.append((owner, ctype, status))
                    if (ctype, status) == ("Admitted", "True") and owner not in self.admitted:
                        self.admitted.append(owner)
            reclaimable = sum(
                int(r.get("count", 0))
                for r in (wl.get("status") or {}).get("reclaimablePods") or []
            )
            self.reclaimable[owner] = max(self.reclaimable.get(owner, 0), reclaimable)
            for assignment in ((wl.get("status") or {}).get("admission") or {}).get(
                "podSetAssignments"
            ) or []:
                self.flavors.setdefault(owner, set()).update(
                    (assignment.get("flavors") or {}).values()
                )

    def of(self, owner: str) -> list[tuple[str, str, str]]:
        with self._lock:
            return list(self.transitions.get(owner, []))


def _wait_finished(log: WorkloadLog, *owners: str) -> None:
    """Until each owner's Workload has been seen Finished."""
    wait_until(
        lambda: all(("Finished", "True") in [t[:2] for t in log.of(o)] for o in owners),
        timeout=60,
        what=f"the Workloads of {', '.join(owners)} finished",
    )


def _template(duration: str) -> dict[str, Any]:
    """A kwok pod of 1 CPU that names no node: the flavor places it."""
    return {
        "metadata": {
            "annotations": {
                "kwok.paralleljob.dev/duration": duration,
                "kwok.paralleljob.dev/exit-code": "0",
            }
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "busybox:1.35.0", "resources": {"requests": {"cpu": "1"}}}
            ],
        },
    }


def _create(
    k: Kubectl,
    arm: str,
    name: str,
    queue: str,
    duration: str,
    *,
    parallelism: int = 1,
    completions: int = 1,
    cpu: str = "1",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> None:
    """A Job (arm ``job``) or a ParallelJob (``pj``) for ``queue``, its pods of ``cpu``."""
    kind, api = ("Job", "batch/v1") if arm == "job" else ("ParallelJob", "paralleljob.dev/v1alpha1")
    template = _template(duration)
    template["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    meta = {"name": name, "labels": {QUEUE_LABEL: queue, **(labels or {})}}
    spec = {"parallelism": parallelism, "completions": completions, "template": template}
    body = {
        "apiVersion": api,
        "kind": kind,
        "metadata": {**meta, "annotations": dict(annotations or {})},
        "spec": spec,
    }
    k.run("create", "-f", "-", input=json.dumps(body))


def _finished(k: Kubectl, arm: str, name: str) -> dict[str, Any] | None:
    kind = "job" if arm == "job" else "pj"
    status = k.json("get", kind, name).get("status") or {}
    done = any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return status if done else None


def _pod_placement(k: Kubectl, arm: str, name: str) -> list[tuple[str, str]]:
    label = "batch.kubernetes.io/job-name" if arm == "job" else "paralleljob.dev/job-name"
    pods = k.json("get", "pods", "-l", f"{label}={name}")["items"]
    key = KWOK_TOLERATION["key"]
    return sorted(
        (
            json.dumps(p["spec"].get("nodeSelector"), sort_keys=True),
            json.dumps([t for t in p["spec"].get("tolerations") or [] if t.get("key") == key]),
        )
        for p in pods
    )


def _wait_done(k: Kubectl, which: tuple[str, ...], timeout: float) -> None:
    names = [(arm, f"{arm}-{w}") for arm in ARMS for w in which]
    wait_until(
        lambda: all(_finished(k, arm, name) for arm, name in names),
        timeout=timeout,
        what=f"{', '.join(n for _, n in names)} done",
    )


# Kueue's own Warning on a Workload that waits for quota, on both arms.
@pytest.mark.warnings("Pending")
def test_queued_while_the_quota_is_full_then_admitted_as_a_job_is(
    operator: Operator, k: Kubectl, queues: dict[str, str], namespace: str
) -> None:
    """Two jobs of 1 CPU on a queue of 1 CPU, per arm: the first admitted at once, the
    second only once the first finished, each placed by the flavor, each Workload
    finished with its job."""
    with WorkloadLog(namespace) as log:
        for arm in ARMS:
            _create(k, arm, f"{arm}-first", queues[arm], "6s")
            _create(k, arm, f"{arm}-second", queues[arm], "2s")
        _wait_done(k, ("first", "second"), timeout=120)
        _wait_finished(log, *(f"{arm}-second" for arm in ARMS))
    for arm in ARMS:
        assert [o for o in log.admitted if o.startswith(arm)] == [f"{arm}-first", f"{arm}-second"]
    for which in ("first", "second"):
        oracle, ours = log.of(f"job-{which}"), log.of(f"pj-{which}")
        assert ours == oracle, (which, oracle, ours)
        assert {f.rsplit("-", 1)[-1] for f in log.flavors[f"pj-{which}"]} == {"pj"}
        assert _pod_placement(k, "pj", f"pj-{which}") == _pod_placement(k, "job", f"job-{which}")
        assert _pod_placement(k, "pj", f"pj-{which}") == [
            (json.dumps(KWOK_NODE), json.dumps([KWOK_TOLERATION]))
        ]
        job, pj = _finished(k, "job", f"job-{which}"), _finished(k, "pj", f"pj-{which}")
        assert job is not None and pj is not None
        assert (
            (pj.get("succeeded"), pj.get("failed", 0))
            == (job.get("succeeded"), job.get("failed", 0))
            == (1, 0)
        )


@pytest.mark.warnings("Pending")
def test_preempted_by_a_higher_priority_then_admitted_again_as_a_job_is(
    operator: Operator, k: Kubectl, queues: dict[str, str], namespace: str
) -> None:
    """A low-priority job runs; a high-priority one arrives and preempts it (its
    Workload evicted, the job suspended and its pod removed); once the high one is done,
    the low one is admitted again and completes."""
    with WorkloadLog(namespace) as log:
        for arm in ARMS:
            low = {PRIORITY_LABEL: f"low-{namespace}"}
            _create(k, arm, f"{arm}-low", queues[arm], "20s", labels=low)
        wait_until(
            lambda: all(f"{arm}-low" in log.admitted for arm in ARMS),
            timeout=60,
            what="both low-priority jobs admitted",
        )
        for arm in ARMS:
            high = {PRIORITY_LABEL: f"high-{namespace}"}
            _create(k, arm, f"{arm}-high", queues[arm], "2s", labels=high)
        _wait_done(k, ("high", "low"), timeout=180)
        _wait_finished(log, *(f"{arm}-low" for arm in ARMS))
    for which in ("low", "high"):
        oracle, ours = log.of(f"job-{which}"), log.of(f"pj-{which}")
        assert ours == oracle, (which, oracle, ours)
    assert ("Evicted", "True", "Preempted") in log.of("pj-low")
    for arm in ARMS:
        done = _finished(k, arm, f"{arm}-low")
        assert done is not None and done.get("succeeded") == 1, done


def _workloads_of(k: Kubectl, owner: str) -> list[dict[str, Any]]:
    items = k.json("get", "workloads.kueue.x-k8s.io")["items"]
    return [
        w
        for w in items
        if any(o.get("name") == owner for o in w["metadata"].get("ownerReferences") or [])
    ]


@pytest.mark.warnings("Pending")
def test_deleted_while_queued_and_while_running_frees_what_it_held(
    operator: Operator, k: Kubectl, queues: dict[str, str], namespace: str
) -> None:
    """A running job and a queued one, per arm: the queued one deleted (its Workload
    goes, the running one keeps its quota), then the running one (its Workload goes and
    its quota frees: a third job waiting behind it is admitted)."""
    with WorkloadLog(namespace) as log:
        for arm in ARMS:
            _create(k, arm, f"{arm}-running", queues[arm], "600s")
            _create(k, arm, f"{arm}-queued", queues[arm], "2s")
        wait_until(
            lambda: all(f"{arm}-running" in log.admitted for arm in ARMS),
            timeout=60,
            what="both running jobs admitted",
        )
        wait_until(
            lambda: all(_workloads_of(k, f"{arm}-queued") for arm in ARMS),
            timeout=60,
            what="both queued jobs' Workloads",
        )
        for arm in ARMS:
            kind = "job" if arm == "job" else "pj"
            k.run("delete", kind, f"{arm}-queued", "--wait=false")
        wait_until(
            lambda: not any(_workloads_of(k, f"{arm}-queued") for arm in ARMS),
            timeout=60,
            what="the queued jobs' Workloads gone",
        )
        for arm in ARMS:
            _create(k, arm, f"{arm}-next", queues[arm], "2s")
        for arm in ARMS:
            kind = "job" if arm == "job" else "pj"
            k.run("delete", kind, f"{arm}-running", "--wait=false")
        _wait_done(k, ("next",), timeout=120)
        wait_until(
            lambda: not any(_workloads_of(k, f"{arm}-running") for arm in ARMS),
            timeout=60,
            what="the running jobs' Workloads gone",
        )
    for which in ("running", "queued"):
        assert log.of(f"pj-{which}") == log.of(f"job-{which}"), which
    assert "pj-queued" not in log.admitted and "job-queued" not in log.admitted
    for arm in ARMS:
        assert log.admitted.index(f"{arm}-next") > log.admitted.index(f"{arm}-running")


@pytest.mark.warnings("Pending")
def test_partially_admitted_with_the_count_the_quota_allows_as_a_job_is(
    operator: Operator, k: Kubectl, queues: dict[str, str], namespace: str
) -> None:
    """Four pods of 500m asked for on a queue of 1 CPU, down to one allowed
    (``kueue.x-k8s.io/job-min-parallelism``): admitted with two, run two at a time, and
    all four completions done."""
    annotation = {"kueue.x-k8s.io/job-min-parallelism": "1"}
    for arm in ARMS:
        _create(
            k, arm, f"{arm}-partial", queues[arm], "2s",
            parallelism=4, completions=4, cpu="500m", annotations=annotation,
        )  # fmt: skip
    with WorkloadLog(namespace) as log:
        _wait_done(k, ("partial",), timeout=120)
        _wait_finished(log, *(f"{arm}-partial" for arm in ARMS))
    assert log.of("pj-partial") == log.of("job-partial")
    counts = {}
    for arm in ARMS:
        [wl] = _workloads_of(k, f"{arm}-partial")
        [assignment] = wl["status"]["admission"]["podSetAssignments"]
        kind = "job" if arm == "job" else "pj"
        status = k.json("get", kind, f"{arm}-partial")["status"]
        counts[arm] = (assignment.get("count"), status.get("succeeded"), status.get("failed", 0))
    assert counts["pj"] == counts["job"] == (2, 4, 0), counts


@pytest.mark.warnings("Pending")
def test_a_parallelcronjob_s_run_is_queued_as_its_template_says(
    operator: Operator, k: Kubectl, queues: dict[str, str], namespace: str
) -> None:
    """A ParallelCronJob whose job template names the queue, triggered now: its run is
    created suspended (the policy), queued as one Workload, admitted on the flavor and
    completed; its Workload finished with it."""
    cron = {
        "apiVersion": "paralleljob.dev/v1alpha1",
        "kind": "ParallelCronJob",
        "metadata": {"name": "nightly", "annotations": {TRIGGER_ANNOTATION: "now"}},
        "spec": {
            "schedule": "0 0 1 1 *",
            "jobTemplate": {
                "metadata": {"labels": {QUEUE_LABEL: queues["pj"]}},
                "spec": {"parallelism": 1, "completions": 1, "template": _template("2s")},
            },
        },
    }
    with WorkloadLog(namespace) as log:
        k.run("create", "-f", "-", input=json.dumps(cron))
        [run] = wait_until(
            lambda: k.json("get", "pj")["items"] or None, timeout=60, what="the triggered run"
        )
        name = run["metadata"]["name"]
        wait_until(lambda: _finished(k, "pj", name), timeout=120, what=f"{name} done")
        _wait_finished(log, name)
    assert [t[:2] for t in log.of(name)][:2] == [("QuotaReserved", "True"), ("Admitted", "True")]
    assert _pod_placement(k, "pj", name) == [(json.dumps(KWOK_NODE), json.dumps([KWOK_TOLERATION]))]


@pytest.mark.warnings("Pending")
def test_parallelism_changed_while_admitted_as_a_job_s_is(
    operator: Operator, k: Kubectl, queues: dict[str, str], namespace: str
) -> None:
    """Parallelism raised from 1 to 2 while the job runs admitted (pods of 500m, 1 CPU
    of quota): as Kueue v0.17.0 does for a Job (no Workload slices: an alpha gate, off),
    the Workload no longer matches the job; the job is stopped and its Workload
    replaced by one of two pods, which is admitted; the job completes."""
    for arm in ARMS:
        _create(k, arm, f"{arm}-scaled", queues[arm], "6s", completions=4, cpu="500m")
    with WorkloadLog(namespace) as log:
        wait_until(
            lambda: all(f"{arm}-scaled" in log.admitted for arm in ARMS),
            timeout=60,
            what="both admitted",
        )
        for arm in ARMS:
            kind = "job" if arm == "job" else "pj"
            k.run(
                "patch", kind, f"{arm}-scaled", "--type=merge", "-p", '{"spec":{"parallelism":2}}'
            )
        _wait_done(k, ("scaled",), timeout=180)
    assert log.of("pj-scaled") == log.of("job-scaled")
    # Admitted twice: the Workload of one pod, then the one of two that replaced it.
    assert [t[:2] for t in log.of("pj-scaled")].count(("Admitted", "True")) == 2
    for arm in ARMS:
        kind = "job" if arm == "job" else "pj"
        status = k.json("get", kind, f"{arm}-scaled")["status"]
        assert (status.get("succeeded"), status.get("failed", 0)) == (4, 0), (arm, status)


@pytest.mark.warnings("Pending")
def test_a_job_deleted_while_the_operator_is_down_leaves_no_quota_held(
    operator: Operator, k: Kubectl, queues: dict[str, str], namespace: str
) -> None:
    """An admitted ParallelJob deleted while the operator is stopped: its Workload waits
    on Kueue's finalizer, which Kueue leaves to the owner's reconciler; the operator,
    started again, removes it, and the quota goes to the job queued behind."""
    _create(k, "pj", "pj-held", queues["pj"], "600s")
    _create(k, "pj", "pj-behind", queues["pj"], "2s")
    wait_until(lambda: _workloads_of(k, "pj-behind"), timeout=60, what="pj-behind's Workload")
    operator.stop()
    k.run("delete", "pj", "pj-held", "--wait=false")
    [held] = wait_until(
        lambda: (
            [w for w in _workloads_of(k, "pj-held") if w["metadata"].get("deletionTimestamp")]
            or None
        ),
        timeout=60,
        what="pj-held's Workload being deleted",
    )
    assert "kueue.x-k8s.io/resource-in-use" in held["metadata"]["finalizers"]
    operator.start()
    wait_until(lambda: not _workloads_of(k, "pj-held"), timeout=60, what="pj-held's Workload gone")
    wait_until(lambda: _finished(k, "pj", "pj-behind"), timeout=120, what="pj-behind done")


@pytest.mark.warnings("Pending")
def test_quota_frees_as_pods_finish_as_a_job_s_does(
    operator: Operator, k: Kubectl, queues: dict[str, str], namespace: str
) -> None:
    """Two pods of 500m at a time for three completions fill the queue's 1 CPU; once two
    have succeeded one pod's worth is reclaimable (one completion left for two slots),
    and a job of one 500m pod queued behind is admitted before the first one ends."""
    with WorkloadLog(namespace) as log:
        for arm in ARMS:
            draining = (f"{arm}-draining", queues[arm], "8s")
            _create(k, arm, *draining, parallelism=2, completions=3, cpu="500m")
            _create(k, arm, f"{arm}-behind", queues[arm], "2s", cpu="500m")
        _wait_done(k, ("draining", "behind"), timeout=180)
        _wait_finished(log, *(f"{arm}-draining" for arm in ARMS))
    assert log.reclaimable["pj-draining"] == log.reclaimable["job-draining"] == 1, log.reclaimable
    for arm in ARMS:
        order = [(o, t, st) for o, t, st in log.sequence if o.startswith(arm)]
        admitted_behind = order.index((f"{arm}-behind", "Admitted", "True"))
        finished_draining = order.index((f"{arm}-draining", "Finished", "True"))
        assert admitted_behind < finished_draining, (arm, order)
    assert log.of("pj-draining") == log.of("job-draining")
    assert log.of("pj-behind") == log.of("job-behind")
