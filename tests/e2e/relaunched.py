"""What the tests of a work queue started again as batch/v1 Jobs share (test_cronjob_workqueue.py:
a CronJob; test_keda.py: a KEDA ScaledJob): the Jobs are the seed's parallel work queue with
``spec.managedBy`` naming the operator, drained on the real node by ``paralleljob-worker`` pods
running the tests' ``TASK`` (workqueue.py), which records in ``by`` the pod that ran each item.

What they check the same way:

* each batch of items was drained by Jobs of its own: none that did the first batch did any of
  the second (a finished work-queue Job does not come back; a new one is started), every item
  done exactly once (``runs``);
* the Jobs were run by the operator and by nothing else: their pods carried the operator's
  finalizer ``paralleljob.dev/tracking`` and its label ``paralleljob.dev/controller-uid``, never
  the built-in's ``batch.kubernetes.io/job-tracking`` (a watch from before the first Job sees
  every pod as it was created); every Event of the Jobs comes from ``paralleljob-operator``;
  ``kubectl get job`` prints them as the seed's workload 3, ``3/1 of 3``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from paralleljob import constants as c
from paralleljob.runtime.events import COMPONENT
from tests.support.wait import wait_until

from .support import Kubectl, parse_table
from .workqueue import Queue

#: The label the operator, as the built-in, puts on a Job's pods.
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
#: What ``kubectl get job`` prints for the seed's workload 3: three workers, all exited 0.
COMPLETIONS = "3/1 of 3"


def job_of(pod: str) -> str:
    """The Job of a pod the operator named: ``<job>-<5 characters>`` (not Indexed)."""
    return pod.rsplit("-", 1)[0]


def jobs(k: Kubectl, selector: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = k.json("get", "jobs", "-l", selector)["items"]
    return found


def terminal(job: dict[str, Any]) -> str | None:
    """Complete or Failed, once the Job has that condition; else None."""
    for cond in job.get("status", {}).get("conditions") or []:
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            return str(cond["type"])
    return None


def settled(k: Kubectl, queue: Queue, selector: str, items: list[str]) -> bool:
    """Every one of ``items`` has its result, nothing is undelivered or pending, and there is
    a Job of ``selector`` and every one has finished."""
    if not set(items) <= set(queue.hash("results")):
        return False
    group = queue.group()
    if (group["lag"], group["pending"]) != (0, 0):
        return False
    found = jobs(k, selector)
    return bool(found) and all(terminal(j) for j in found)


def drained_by(queue: Queue, batches: list[list[str]]) -> list[set[str]]:
    """For each batch, the Jobs whose pods ran its items."""
    by = queue.hash("by")
    return [{job_of(by[item]) for item in batch} for batch in batches]


def history_kept(k: Kubectl, selector: str, history: int, gone: set[str]) -> list[str]:
    """Waits until at most ``history`` complete Jobs of ``selector`` remain and no pod of
    the Jobs ``gone`` is left (their controller deletes them, the garbage collector their
    pods); returns the complete Jobs kept, none of ``gone`` among them."""

    def kept() -> list[str] | None:
        complete = [j["metadata"]["name"] for j in jobs(k, selector) if terminal(j) == "Complete"]
        left = k.json("get", "pods", "-l", selector)["items"]
        of_gone = [p for p in left if p["metadata"]["labels"].get(JOB_NAME_LABEL) in gone]
        return complete if len(complete) <= history and not of_gone else None

    complete: list[str] = wait_until(
        kept, timeout=60, interval=1, what=f"at most {history} complete Job kept"
    )
    assert not set(complete) & gone
    return complete


def show_jobs(k: Kubectl, selector: str, when: str) -> str:
    text = k.run("get", "jobs", "-l", selector).stdout
    print(f"\n$ kubectl get jobs -l {selector}   # {when}\n{text}", end="")
    return text


def assert_printed_as_the_seed_s_workload_3(
    k: Kubectl, names: set[str], selector: str = ""
) -> None:
    """The Jobs ``names`` print as the seed's workload 3 does. One a CronJob's history
    limit deleted meanwhile cannot be printed (its next run, with nothing left to do,
    completes within a minute and takes its place): then the Jobs of ``selector`` kept
    are, which ran the same workers."""
    listed = k.run("get", "jobs", "--ignore-not-found", *sorted(names)).stdout
    if not listed.strip() and selector:
        listed = k.run("get", "jobs", "-l", selector).stdout
    rows = {row["NAME"]: row for row in parse_table(listed)}
    assert rows, f"none of {sorted(names)} is left to print, nor any Job"
    assert {n: (r["STATUS"], r["COMPLETIONS"]) for n, r in rows.items()} == {
        n: ("Complete", COMPLETIONS) for n in rows
    }


@dataclass
class PodsSeen:
    """Every pod matching ``selector`` in the namespace, as a watch (from before the first
    Job) saw it: for each pod the union of the finalizers, and the labels, of every event."""

    core_v1: Any
    namespace: str
    selector: str
    finalizers: dict[str, set[str]] = field(default_factory=dict)
    labels: dict[str, dict[str, str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _ready: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def __enter__(self) -> PodsSeen:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(timeout=30), f"the pod watch did not start: {self.errors}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)

    def _record(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        with self._lock:
            self.finalizers.setdefault(meta["name"], set()).update(meta.get("finalizers") or [])
            self.labels.setdefault(meta["name"], {}).update(meta.get("labels") or {})

    def _run(self) -> None:
        from kubernetes import watch

        serialize: Callable[[Any], dict[str, Any]] = (
            self.core_v1.api_client.sanitize_for_serialization
        )
        rv = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    listed = self.core_v1.list_namespaced_pod(
                        self.namespace, label_selector=self.selector
                    )
                    for pod in listed.items:
                        self._record(serialize(pod))
                    rv = listed.metadata.resource_version
                    self._ready.set()
                for event in watch.Watch().stream(
                    self.core_v1.list_namespaced_pod,
                    self.namespace,
                    label_selector=self.selector,
                    resource_version=rv,
                    timeout_seconds=5,
                ):
                    pod = serialize(event["object"])
                    rv = pod["metadata"]["resourceVersion"]
                    self._record(pod)
                    if self._stop.is_set():
                        return
            except Exception as exc:  # a 410 Gone (list again), or the API server's hiccup
                self.errors.append(repr(exc))
                rv = None
                if len(self.errors) > 20:
                    return

    def of_jobs(self, names: set[str]) -> dict[str, set[str]]:
        """The finalizers seen on each pod of the Jobs ``names``."""
        with self._lock:
            return {
                pod: set(fins)
                for pod, fins in self.finalizers.items()
                if self.labels.get(pod, {}).get(JOB_NAME_LABEL) in names
            }


def assert_run_by_the_operator_alone(k: Kubectl, pods: PodsSeen, names: set[str]) -> None:
    """The Jobs ``names`` (those that ran items) were the operator's, as the module says."""
    seen = pods.of_jobs(names)
    assert {job_of(p) for p in seen} == names, (sorted(seen), sorted(names))
    assert len(seen) >= 3 * len(names), "three workers per Job"
    for pod, fins in seen.items():
        assert c.TRACKING_FINALIZER in fins, (pod, fins)
        assert c.JOB_TRACKING_FINALIZER not in fins, (pod, fins)
        assert c.LABEL_CONTROLLER_UID in pods.labels[pod], pods.labels[pod]
    # No pod of any Job (those that found the queue empty too) had the built-in's finalizer.
    with pods._lock:
        assert not [p for p, f in pods.finalizers.items() if c.JOB_TRACKING_FINALIZER in f]
    for name in sorted(names):
        events = [
            e
            for e in k.json("get", "events", "--field-selector", f"involvedObject.name={name}")[
                "items"
            ]
            if e["involvedObject"].get("kind") == "Job"
        ]
        sources = {e.get("source", {}).get("component") for e in events}
        assert sources == {COMPONENT}, (name, sources)
        assert {"SuccessfulCreate", "Completed"} <= {e["reason"] for e in events}, name
