"""KEDA scales a ParallelJob through ``/scale`` (issue 11): the example
``manifests/examples/workqueue-autoscaled``, applied in one go to the test's namespace as
``kubectl -n NS apply -k`` applies it (Redis, the producer, the worker ParallelJob, its
ScaledObject), drained by ``paralleljob-worker`` pods on the real node while KEDA's
ScaledObject moves ``spec.parallelism`` with the stream's backlog.

KEDA is the pinned one, installed by ``hack/keda.sh up`` (``make keda``: on the local cluster
built from the Go module proxy; on kind its released manifests) and removed again after the
last of the run's workers that use it, when this run installed it. Its HPA is
kube-controller-manager's (sync every 15 s); the external metric goes through the API server's
aggregation layer to KEDA's metrics server.

What the test changes in the rendered example: the image (the one ``hack/node-image.sh``
loaded), the number of items (the producer's ``LAST`` and, as the example's replacement
does, the count its workers wait for), the workers' task (the tests' ``TASK``: ITEM_SECONDS
per item, and its runs counted) and the ScaledObject's scale-down window (none, so that the
scale-down shows within the test). Everything else is the example's: in particular the
Redis address KEDA dials is built from the namespace, which is not the docs' ``wq``.

What is checked: the Secret the address is built from holds the namespace; the producer
completes; parallelism reaches the ScaledObject's maximum and the pods follow; it comes down
while the backlog drains; every item has exactly one correct result and ran once, none is
dead-lettered; the job is ``Complete`` and no pod is counted as failed although the
scale-down stopped workers. A plot of backlog, ``spec.parallelism`` and active pods over time
is written to ``_output/keda-autoscaling.png`` (``PJ_TEST_OUTPUT`` to change the directory).

The second test applies ``manifests/examples/workqueue-scaledjob`` the same way: a KEDA
ScaledJob whose batch/v1 Jobs (``jobTargetRef.managedBy``: the operator) are the seed's
parallel work queue, created only while the stream has lag (maxReplicaCount 1); see its docstring
and relaunched.py for what it checks.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from paralleljob import constants as c
from tests.conftest import Cluster
from tests.support.locks import shared_use
from tests.support.wait import wait_until

from .conftest import Operator
from .relaunched import (
    PodsSeen,
    assert_printed_as_the_seed_s_workload_3,
    assert_run_by_the_operator_alone,
    drained_by,
    history_kept,
    jobs,
    settled,
    show_jobs,
    terminal,
)
from .support import Kubectl, kubectl
from .workqueue import (
    REPO,
    Queue,
    finished,
    items_of,
    producer_done,
    redis_queue,
    run_task,
    show,
)

pytestmark = [pytest.mark.realnode]

KEDA = REPO / "hack" / "keda.sh"
EXAMPLE = REPO / "manifests" / "examples" / "workqueue-autoscaled"
#: The example's ParallelJob and ScaledObject, its producer Job, its namespace Secret.
NAME = "autoscaled-workqueue-job"
PRODUCER = "enqueue-items"
NAMESPACE_SECRET = "this-namespace"
EXAMPLE_IMAGE = "paralleljob-operator:dev"
OUTPUT = Path(os.environ.get("PJ_TEST_OUTPUT", REPO / "_output"))
METRICS_API = "v1beta1.external.metrics.k8s.io"
#: The items the queue starts with: 150 in `make test`, 300 (the issue's) with KEDA_ITEMS=300
#: (`make test-keda`), which produced docs/img/keda-autoscaling.png.
ITEMS = int(os.environ.get("KEDA_ITEMS", "150"))
#: Long enough that the backlog still drains for a while after the HPA's first scale-down.
ITEM_SECONDS = "1.5"
SAMPLE_SECONDS = 2.0


def _keda_available() -> bool:
    out = kubectl("get", "apiservice", METRICS_API, "-o", "yaml", check=False)
    if out.returncode != 0:
        return False
    conditions = (yaml.safe_load(out.stdout).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)


@pytest.fixture(scope="module")
def keda(cluster: Cluster) -> Iterator[None]:
    """KEDA on the cluster while any worker's test uses it; removed after the last one when
    this run installed it."""
    context = kubectl("config", "current-context", check=False).stdout.strip()
    if cluster.local:
        mode = "local"
    elif context.startswith("kind-"):
        mode = "kind"
    else:
        pytest.skip("KEDA is installed on the local cluster or kind only")
    env = {**os.environ, "PJ_USER_KUBECONFIG": cluster.kubeconfig}

    def up() -> bool:
        there_before = _keda_available()
        started = time.monotonic()
        proc = subprocess.run(
            [str(KEDA), "up", mode], env=env, capture_output=True, text=True, timeout=1800
        )
        if proc.returncode != 0:
            pytest.fail(f"hack/keda.sh up {mode} failed:\n{proc.stderr[-4000:]}", pytrace=False)
        print(f"\nhack/keda.sh up {mode}: {time.monotonic() - started:.0f}s")
        return not there_before

    def down() -> None:
        proc = subprocess.run(
            [str(KEDA), "down", mode], env=env, capture_output=True, text=True, timeout=600
        )
        if proc.returncode != 0:
            pytest.fail(f"hack/keda.sh down {mode} failed:\n{proc.stderr[-4000:]}")

    with shared_use("keda", up, down):
        yield


def example(image: str) -> list[dict[str, Any]]:
    """The example as ``kubectl apply -k`` applies it, changed for the test as the module's
    docstring says."""
    rendered = kubectl("kustomize", str(EXAMPLE)).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == [
        "Deployment",
        "Job",
        "ParallelJob",
        "ScaledObject",
        "Secret",
        "Service",
        "ServiceAccount",
    ], kinds
    [producer] = [d for d in docs if d["kind"] == "Job"]
    [pj] = [d for d in docs if d["kind"] == "ParallelJob"]
    [so] = [d for d in docs if d["kind"] == "ScaledObject"]
    assert producer["metadata"]["name"] == PRODUCER and pj["metadata"]["name"] == NAME
    assert so["spec"]["scaleTargetRef"]["name"] == NAME

    pods = [producer["spec"]["template"]["spec"], pj["spec"]["template"]["spec"]]
    containers = [c for pod in pods for c in pod.get("initContainers", []) + pod["containers"]]
    ours = [c for c in containers if c["image"] == EXAMPLE_IMAGE]
    assert [c["name"] for c in ours] == ["enqueue", "wait-for-items", "worker"], ours
    for container in ours:
        container["image"] = image
    [enqueue] = producer["spec"]["template"]["spec"]["containers"]
    [wait] = pj["spec"]["template"]["spec"]["initContainers"]
    for container in (enqueue, wait):
        _set_env(container, FIRST="1", LAST=str(ITEMS))
    [worker] = pj["spec"]["template"]["spec"]["containers"]
    run_task(worker, image, ITEM_SECONDS=ITEM_SECONDS)

    behavior = so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    behavior["scaleDown"]["stabilizationWindowSeconds"] = 0
    return docs


def _set_env(container: dict[str, Any], **values: str) -> None:
    env = {var["name"]: var for var in container["env"]}
    for name, value in values.items():
        assert "value" in env[name], (container["name"], env[name])
        env[name]["value"] = value


def _hpa_story(k: Kubectl) -> str:
    """The HPA's conditions and Events: why it did (not) scale, for a failure's message (a
    metric the aggregation layer did not serve in time leaves ScalingActive False)."""
    hpa = k.json("get", "hpa", f"keda-hpa-{NAME}")
    conditions = [
        f"{c['type']}={c['status']} {c.get('reason', '')}: {c.get('message', '')}"
        for c in (hpa.get("status") or {}).get("conditions", [])
    ]
    events = k.run(
        "get",
        "events",
        "--field-selector",
        f"involvedObject.name=keda-hpa-{NAME}",
        check=False,
    ).stdout
    return "HPA conditions:\n" + "\n".join(conditions) + "\nHPA events:\n" + events


def _secret_namespace(k: Kubectl) -> str | None:
    data = k.json("get", "secret", NAMESPACE_SECRET).get("data") or {}
    return base64.b64decode(data["namespace"]).decode() if "namespace" in data else None


@dataclass(frozen=True)
class Sample:
    seconds: float
    backlog: int
    parallelism: int
    active: int


@dataclass
class Sampler:
    """Backlog (the group's lag), spec.parallelism and active pods, every SAMPLE_SECONDS, in
    a thread, until stopped: what the plot shows and the scale-down check reads."""

    k: Kubectl
    queue: Queue
    job: str
    #: What ``seconds`` counts from (time.monotonic()).
    started: float = field(default_factory=time.monotonic)
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            try:
                self.samples.append(self._take())
            # A sample missed (e.g. no consumer group before the first worker starts, which
            # redis-cli or kubectl report as AssertionError); the next one counts.
            except (AssertionError, subprocess.SubprocessError, KeyError, ValueError):
                continue

    def _take(self) -> Sample:
        pj = self.k.pj(self.job)
        return Sample(
            seconds=time.monotonic() - self.started,
            backlog=int(self.queue.group()["lag"]),
            parallelism=int(pj["spec"]["parallelism"]),
            active=int((pj.get("status") or {}).get("active", 0)),
        )

    def latest(self) -> Sample | None:
        return self.samples[-1] if self.samples else None


def plot(samples: list[Sample], maximum: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seconds = [s.seconds for s in samples]
    fig, backlog_axis = plt.subplots(figsize=(8, 4.5))
    backlog_axis.plot(seconds, [s.backlog for s in samples], color="tab:gray", label="backlog")
    backlog_axis.set_xlabel("seconds since the example was applied")
    backlog_axis.set_ylabel("items not yet delivered (stream lag)")
    pods_axis = backlog_axis.twinx()
    pods_axis.step(seconds, [s.parallelism for s in samples], where="post", label="parallelism")
    pods_axis.step(seconds, [s.active for s in samples], where="post", label="active pods")
    pods_axis.set_ylim(0, maximum + 1)
    pods_axis.set_ylabel("pods")
    handles = backlog_axis.get_legend_handles_labels()[0] + pods_axis.get_legend_handles_labels()[0]
    pods_axis.legend(handles=handles, loc="upper right")
    backlog_axis.set_title(f"KEDA scaling a ParallelJob: {ITEMS} items, lagCount 20, max {maximum}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# The example is applied in one go: KEDA's scaler and the HPA (through KEDA's metrics
# server) ask Redis for the backlog before its pod is up, and KEDA may check the
# ParallelJob's /scale before the ParallelJob is stored ("Target resource doesn't expose
# /scale subresource", ScaledObjectCheckFailed, then ready at its next reconcile).
@pytest.mark.warnings(
    "KEDAScalerFailed",
    "FailedGetExternalMetric",
    "FailedComputeMetricsReplicas",
    "ScaledObjectCheckFailed",
    "ScaledObjectDeleted",
)
@pytest.mark.long
def test_keda_scales_parallelism_with_the_backlog_and_nothing_is_lost(
    operator: Operator, k: Kubectl, worker_image: str, keda: None
) -> None:
    docs = example(worker_image)
    [so] = [d for d in docs if d["kind"] == "ScaledObject"]
    maximum = int(so["spec"]["maxReplicaCount"])
    items = items_of(1, ITEMS)
    applied = time.monotonic()
    k.run("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    # Redis is the example's; the test only reads it (redis-cli in its pod).
    queue = redis_queue(k, worker_image)
    with Sampler(k, queue, NAME, started=applied) as sampler:
        # What KEDA's address is built from: this namespace, written by the control plane.
        namespace = wait_until(
            lambda: _secret_namespace(k), timeout=60, interval=1, what="the namespace Secret"
        )
        assert namespace == k.ns
        producer_done(k, PRODUCER)

        def scaled_up() -> Sample | None:
            last = sampler.latest()
            return last if last and last.parallelism == last.active == maximum else None

        # The workers wait for the items; KEDA polls every 5 s, the HPA syncs every 15 s;
        # then the operator and the kubelet.
        top = wait_until(scaled_up, timeout=180, interval=1, what=f"{maximum} workers")
        show(k, NAME, f"scaled up to {maximum} {top.seconds:.0f}s after the apply")
        outcome = finished(k, NAME, timeout=400)
    show(k, NAME, "done")
    after_top = [s for s in sampler.samples if s.seconds > top.seconds]
    assert outcome == "Complete"
    lowered = [s for s in after_top if s.parallelism < maximum]
    assert lowered, f"parallelism never came down: {sampler.samples}\n{_hpa_story(k)}"
    print(f"parallelism lowered to {lowered[0].parallelism} at backlog {lowered[0].backlog}")
    status = k.status(NAME)
    assert status.get("failed", 0) == 0, "a pod stopped by a scale-down was counted as failed"
    queue.assert_done(items, once=True)
    hpa = k.json("get", "hpa", f"keda-hpa-{NAME}")
    assert hpa["spec"]["scaleTargetRef"]["kind"] == "ParallelJob"
    plot(sampler.samples, maximum, OUTPUT / "keda-autoscaling.png")
    # The autoscaler goes before its target, as a user removes them: the cleanup's delete
    # of the job would otherwise meet the HPA's next sync (a Warning FailedRescale).
    k.run("delete", "scaledobject", NAME, "--wait=true")
    wait_until(
        lambda: k.run("get", "hpa", f"keda-hpa-{NAME}", check=False).returncode != 0,
        timeout=60,
        what="the ScaledObject's HPA gone",
    )


# ------------------------------------------------------------------ a ScaledJob


SCALEDJOB_EXAMPLE = REPO / "manifests" / "examples" / "workqueue-scaledjob"
SCALEDJOB = "workqueue-scaledjob"
#: KEDA's label on the Jobs it creates and on their pod template.
SCALEDJOB_SELECTOR = f"scaledjob.keda.sh/name={SCALEDJOB}"
#: Each of the two batches.
BATCH = 30
#: The test's successfulJobsHistoryLimit (the example's is 2).
SCALEDJOB_HISTORY = 1


def scaledjob_example(image: str) -> list[dict[str, Any]]:
    """The example as ``kubectl apply -k`` applies it, with the test's image and ``TASK``, a
    batch of BATCH items, and successfulJobsHistoryLimit SCALEDJOB_HISTORY, so that the limit
    is seen at work with two Jobs."""
    rendered = kubectl("kustomize", str(SCALEDJOB_EXAMPLE)).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["Deployment", "Job", "ScaledJob", "Secret", "Service", "ServiceAccount"]
    [producer] = [d for d in docs if d["kind"] == "Job"]
    [sj] = [d for d in docs if d["kind"] == "ScaledJob"]
    assert (producer["metadata"]["name"], sj["metadata"]["name"]) == (PRODUCER, SCALEDJOB)
    [enqueue] = producer["spec"]["template"]["spec"]["containers"]
    [worker] = sj["spec"]["jobTargetRef"]["template"]["spec"]["containers"]
    assert enqueue["image"] == worker["image"] == EXAMPLE_IMAGE
    enqueue["image"] = image
    _set_env(enqueue, FIRST="1", LAST=str(BATCH))
    run_task(worker, image, ITEM_SECONDS="0.05")
    assert sj["spec"]["maxReplicaCount"] == 1
    sj["spec"]["successfulJobsHistoryLimit"] = SCALEDJOB_HISTORY
    return docs


def _keda_polled_idle(namespace: str, since: str) -> bool:
    """KEDA's operator logged, since ``since`` (RFC 3339), a poll of the namespace's ScaledJob
    that counted no running Job (its executor's "Scaling Jobs" line, each poll)."""
    out = kubectl("-n", "keda", "logs", "deploy/keda-operator", f"--since-time={since}")
    idle = re.compile(
        rf'"scaledJob.Name": "{SCALEDJOB}", "scaledJob.Namespace": "{namespace}", '
        r'"Number of running Jobs": 0\b'
    )
    return any(idle.search(line) for line in out.stdout.splitlines())


def _condition(obj: dict[str, Any], ctype: str) -> str | None:
    for cond in obj.get("status", {}).get("conditions") or []:
        if cond["type"] == ctype:
            return str(cond["status"])
    return None


# KEDA's scaler polls Redis before its pod, applied with the ScaledJob, is up.
@pytest.mark.warnings("KEDAScalerFailed", "ScaledJobDeleted")
def test_keda_scaledjob_starts_a_job_run_by_the_operator_only_while_the_stream_has_lag(
    operator: Operator, k: Kubectl, worker_image: str, keda: None, core_v1: Any
) -> None:
    """manifests/examples/workqueue-scaledjob applied in one go: KEDA creates a batch/v1 Job
    (jobTargetRef.managedBy: the operator) once the producer's items are in (two polls racing
    may start two); with the stream drained and no Job running it creates no new one (its poll
    is seen in its log, the ScaledJob's Active condition False); a second batch gets a Job of
    its own. Each batch drained once, by Jobs the operator alone ran (relaunched.py), and the
    history limit kept."""
    docs = scaledjob_example(worker_image)
    first = items_of(1, BATCH)
    with PodsSeen(core_v1, k.ns, SCALEDJOB_SELECTOR) as pods:
        k.run("apply", "-f", "-", input=yaml.safe_dump_all(docs))
        try:
            # As stored: KEDA's CRD keeps managedBy (a field it lacked would be pruned).
            stored = k.json("get", "scaledjob", SCALEDJOB)
            assert stored["spec"]["jobTargetRef"]["managedBy"] == c.MANAGED_BY
            queue = redis_queue(k, worker_image)
            producer_done(k, PRODUCER)
            wait_until(
                lambda: settled(k, queue, SCALEDJOB_SELECTOR, first),
                timeout=180,
                interval=1,
                what="a Job of the ScaledJob to drain the first batch",
            )
            show_jobs(k, SCALEDJOB_SELECTOR, "the first batch drained")
            [ran_first] = drained_by(queue, [first])
            assert_printed_as_the_seed_s_workload_3(k, ran_first)

            # No lag, no Job running: KEDA polls and starts none.
            since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            before = {j["metadata"]["name"] for j in jobs(k, SCALEDJOB_SELECTOR)}
            wait_until(
                lambda: _keda_polled_idle(k.ns, since),
                timeout=60,
                interval=2,
                what="KEDA's poll of the drained stream with no Job running",
            )
            wait_until(
                lambda: _condition(k.json("get", "scaledjob", SCALEDJOB), "Active") == "False",
                timeout=30,
                interval=1,
                what="the ScaledJob not Active",
            )
            # No new name: KEDA's history limit may delete one of ``before`` meanwhile (two
            # polls racing can start two Jobs for one batch; CI saw both within 20 ms).
            now = jobs(k, SCALEDJOB_SELECTOR)
            assert {j["metadata"]["name"] for j in now} <= before, "a Job with no lag"
            assert all(terminal(j) for j in now)

            second = queue.enqueue(BATCH + 1, 2 * BATCH)
            wait_until(
                lambda: settled(k, queue, SCALEDJOB_SELECTOR, first + second),
                timeout=180,
                interval=1,
                what="a new Job of the ScaledJob to drain the second batch",
            )
            show_jobs(k, SCALEDJOB_SELECTOR, "the second batch drained")
            queue.assert_done(first + second, once=True)
            ran_first, ran_second = drained_by(queue, [first, second])
            assert ran_first.isdisjoint(ran_second) and not ran_second & before
            assert_printed_as_the_seed_s_workload_3(k, ran_second)
            for job in jobs(k, SCALEDJOB_SELECTOR):
                [owner] = job["metadata"]["ownerReferences"]
                assert (owner["kind"], owner["name"]) == ("ScaledJob", SCALEDJOB)
                assert job["spec"]["managedBy"] == c.MANAGED_BY
                assert job["spec"]["parallelism"] == 3 and "completions" not in job["spec"]
            assert_run_by_the_operator_alone(k, pods, ran_first | ran_second)

            # The history limit: KEDA deletes the first batch's Job on a poll, the garbage
            # collector its pods.
            history_kept(k, SCALEDJOB_SELECTOR, SCALEDJOB_HISTORY, ran_first)
            show_jobs(k, SCALEDJOB_SELECTOR, f"successfulJobsHistoryLimit {SCALEDJOB_HISTORY}")
        finally:
            # KEDA's finalizer goes while it runs; the Jobs go with the ScaledJob (the
            # operator fixture then deletes what is left and waits for the pods' release).
            k.run("delete", "scaledjob", SCALEDJOB, "--timeout=120s", check=False)
