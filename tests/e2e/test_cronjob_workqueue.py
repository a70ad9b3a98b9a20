"""A work queue started again by a batch/v1 CronJob (the seed: "use a CronJob to run the Job
periodically so the queue is started again"; issue 22, part 4): the CronJob of
``manifests/examples/cronjob-workqueue`` on the real node, its Jobs (``spec.managedBy``: the
operator) run by the ``operator`` fixture (watching only the test's namespace) and by nothing
else, kube-controller-manager's CronJob controller scheduling them every minute.

What runs: the example's Redis (the ``queue`` fixture) and producer (``Queue.enqueue``); the
example's CronJob as ``kubectl kustomize`` renders it, with the test's image and ``TASK``
(workqueue.py) and ``successfulJobsHistoryLimit`` 1 instead of 2, so that the history limit is
seen at work with two runs. A first batch is enqueued before the CronJob exists; the second
once every Job has finished and the queue is empty, so a Job that drained the first one had
ended before it arrived.

What is checked (relaunched.py says how): each batch drained by a scheduled Job of its own,
every item done exactly once; the Jobs the CronJob's (owner, ``managedBy``), printed ``3/1 of
3``, run by the operator alone (its finalizer and label on their pods, never the built-in's;
its Events only); and the history limit kept: once the second batch is done, the first
batch's Job is deleted with its pods, and no more than one complete Job remains.

It takes two to three minutes: the first run comes at the next minute, the second a minute
later (cron's finest step).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from paralleljob import constants as c
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
from .workqueue import REPO, Queue, run_task

pytestmark = [pytest.mark.realnode]

EXAMPLE = REPO / "manifests" / "examples" / "cronjob-workqueue"
NAME = "cronjob-workqueue"
SELECTOR = f"app.kubernetes.io/name={NAME}"
#: The test's successfulJobsHistoryLimit (the example's is 2).
HISTORY = 1
#: A run every minute: up to a minute to the next one, then its pods, then the items.
RUN_TIMEOUT = 240


def cronjob(image: str) -> dict[str, Any]:
    """The example's CronJob as ``kubectl apply -k`` applies it, changed as the module says."""
    docs = [d for d in yaml.safe_load_all(kubectl("kustomize", str(EXAMPLE)).stdout) if d]
    [cron] = [d for d in docs if d["kind"] == "CronJob"]
    assert isinstance(cron, dict) and cron["metadata"]["name"] == NAME
    spec = cron["spec"]
    assert (spec["schedule"], spec["concurrencyPolicy"]) == ("* * * * *", "Forbid")
    job = spec["jobTemplate"]["spec"]
    assert job["managedBy"] == c.MANAGED_BY and "completions" not in job
    [worker] = job["template"]["spec"]["containers"]
    run_task(worker, image, ITEM_SECONDS="0.05")
    spec["successfulJobsHistoryLimit"] = HISTORY
    return cron


@pytest.mark.long
def test_a_cronjob_relaunches_the_work_queue_each_batch_drained_by_a_scheduled_job(
    operator: Operator, k: Kubectl, queue: Queue, core_v1: Any
) -> None:
    first = queue.enqueue(1, 30)
    with PodsSeen(core_v1, k.ns, SELECTOR) as pods:
        k.run("create", "-f", "-", input=yaml.safe_dump(cronjob(queue.image)))
        try:
            wait_until(
                lambda: settled(k, queue, SELECTOR, first),
                timeout=RUN_TIMEOUT,
                interval=2,
                what="a scheduled Job to drain the first batch",
            )
            show_jobs(k, SELECTOR, "the first batch drained")
            [ran_first] = drained_by(queue, [first])
            assert_printed_as_the_seed_s_workload_3(k, ran_first, SELECTOR)
            # The Jobs finished before the second batch (a Job scheduled meanwhile is not).
            before = {j["metadata"]["name"] for j in jobs(k, SELECTOR) if terminal(j)}

            second = queue.enqueue(31, 60)
            wait_until(
                lambda: settled(k, queue, SELECTOR, first + second),
                timeout=RUN_TIMEOUT,
                interval=2,
                what="the next scheduled Job to drain the second batch",
            )
            show_jobs(k, SELECTOR, "the second batch drained")
            queue.assert_done(first + second, once=True)
            ran_first, ran_second = drained_by(queue, [first, second])
            assert ran_first.isdisjoint(ran_second), "a finished Job took more items"
            assert not ran_second & before, "a Job that had finished came back"
            assert_printed_as_the_seed_s_workload_3(k, ran_second, SELECTOR)
            for job in jobs(k, SELECTOR):
                [owner] = job["metadata"]["ownerReferences"]
                assert (owner["kind"], owner["name"]) == ("CronJob", NAME)
                assert job["spec"]["managedBy"] == c.MANAGED_BY
            assert_run_by_the_operator_alone(k, pods, ran_first | ran_second)

            # The history limit: the first batch's Job goes (the CronJob controller deletes
            # it, the garbage collector its pods), HISTORY complete Jobs at most remain.
            history_kept(k, SELECTOR, HISTORY, ran_first)
            show_jobs(k, SELECTOR, f"successfulJobsHistoryLimit {HISTORY}")
            status = k.json("get", "cronjob", NAME)["status"]
            assert status.get("lastSuccessfulTime") and not status.get("active"), status
        finally:
            # No run after the test's: its Jobs go with it (the operator fixture then
            # deletes what is left and waits for every pod to be released).
            k.run("delete", "cronjob", NAME, "--wait=false", check=False)
