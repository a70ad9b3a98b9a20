"""The seed's drained-queue relaunch with a ParallelCronJob (issue 38, item 4): the example
``manifests/examples/parallelcronjob-workqueue`` on the real node, its ParallelJobs (the
seed's parallel work queue) started every minute by the ``operator`` fixture's cron
controller, as test_cronjob_workqueue.py does it with a batch/v1 CronJob.

What runs: the example's Redis (the ``queue`` fixture) and producer (``Queue.enqueue``); the
example's ParallelCronJob as ``kubectl kustomize`` renders it, with the test's image and
``TASK`` (workqueue.py) and ``successfulJobsHistoryLimit`` 1. A first batch is enqueued
before the ParallelCronJob exists; the second once every ParallelJob has finished and the
queue is empty. Each batch must be drained by scheduled ParallelJobs of its own, every item
done exactly once, the jobs the ParallelCronJob's, and the history limit kept. Two to
three minutes: a run every minute."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.support.wait import wait_until

from .conftest import Operator
from .relaunched import drained_by, terminal
from .support import Kubectl, kubectl
from .workqueue import REPO, Queue, run_task

pytestmark = [pytest.mark.realnode]

EXAMPLE = REPO / "manifests" / "examples" / "parallelcronjob-workqueue"
NAME = "parallelcronjob-workqueue"
SELECTOR = f"app.kubernetes.io/name={NAME}"
HISTORY = 1
RUN_TIMEOUT = 240


def parallelcronjob(image: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(kubectl("kustomize", str(EXAMPLE)).stdout) if d]
    [cron] = [d for d in docs if d["kind"] == "ParallelCronJob"]
    spec = cron["spec"]
    assert (spec["schedule"], spec["concurrencyPolicy"]) == ("* * * * *", "Forbid")
    assert "completions" not in spec["jobTemplate"]["spec"], "a work queue"
    [worker] = spec["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    run_task(worker, image, ITEM_SECONDS="0.05")
    spec["successfulJobsHistoryLimit"] = HISTORY
    return dict(cron)


def pjs(k: Kubectl) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = k.json("get", "pj", "-l", SELECTOR)["items"]
    return found


def settled(k: Kubectl, queue: Queue, items: list[str]) -> bool:
    """Every item has its result, nothing waits or is pending, every ParallelJob is done."""
    if not set(items) <= set(queue.hash("results")):
        return False
    if (queue.group()["lag"], queue.group()["pending"]) != (0, 0):
        return False
    found = pjs(k)
    return bool(found) and all(terminal(j) for j in found)


@pytest.mark.long
def test_a_parallelcronjob_relaunches_the_work_queue_each_batch_drained_by_its_own_run(
    operator: Operator, k: Kubectl, queue: Queue
) -> None:
    first = queue.enqueue(1, 30)
    k.run("create", "-f", "-", input=yaml.safe_dump(parallelcronjob(queue.image)))
    try:
        wait_until(
            lambda: settled(k, queue, first),
            timeout=RUN_TIMEOUT,
            interval=2,
            what="a scheduled ParallelJob to drain the first batch",
        )
        [ran_first] = drained_by(queue, [first])
        before = {j["metadata"]["name"] for j in pjs(k)}
        second = queue.enqueue(31, 60)
        wait_until(
            lambda: settled(k, queue, first + second),
            timeout=RUN_TIMEOUT,
            interval=2,
            what="the next scheduled ParallelJob to drain the second batch",
        )
        queue.assert_done(first + second, once=True)
        ran_first, ran_second = drained_by(queue, [first, second])
        assert ran_first.isdisjoint(ran_second), "a finished ParallelJob took more items"
        assert not ran_second & before, "a ParallelJob that had finished came back"
        for job in pjs(k):
            [owner] = job["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"]) == ("ParallelCronJob", NAME)
            assert terminal(job) == "Complete"
        # Printed as the seed's workload 3 (the first batch's may be gone: the history).
        for name in ran_second:
            assert k.row(name).completions == "3/1 of 3", k.row(name)

        # The history limit: the first batch's ParallelJob goes, HISTORY complete remain.
        def kept() -> list[str] | None:
            complete = [j["metadata"]["name"] for j in pjs(k) if terminal(j) == "Complete"]
            return complete if len(complete) <= HISTORY else None

        complete = wait_until(kept, timeout=90, what=f"at most {HISTORY} complete kept")
        assert not set(complete) & ran_first
        status = k.json("get", "pcj", NAME)["status"]
        assert status.get("lastSuccessfulTime") and not status.get("active"), status
    finally:
        k.run("delete", "pcj", NAME, "--wait=false", check=False)
