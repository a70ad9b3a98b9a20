"""The work-queue pattern for real (docs/worker.md): ``paralleljob-worker`` pods drain a Redis
stream on the real node, their ParallelJob driven by the operator (the ``operator`` fixture,
watching only the test's namespace), and no item is lost when workers are deleted, SIGKILLed or
scaled down, a poison item is dead-lettered, and an unreachable Redis fails the pods with one
line under the job's backoffLimit.

What runs, and why:

* The worker runs from the operator's image (it carries both console scripts). The session
  fixture ``worker_image`` puts it on the node with ``hack/node-image.sh``, the script
  ``make deploy-local``/``make deploy`` use: it hashes the image's build inputs and, when the
  image built from them is on the node already, returns at once without building or even
  starting a docker engine; otherwise it builds (docker's layer cache) and imports it. The
  tests use the content tag it prints, never ``:dev``. ``PJ_WORKER_IMAGE`` names an image the
  node already has and skips the script (e.g. on a cluster that is neither local nor kind).
* Redis (``redis:7.0.15``, preloaded on the local cluster's node) and the producer are the
  example's own manifests (``manifests/examples/workqueue``), applied into the test's
  namespace; the ParallelJobs are the example's, with the test's image, parallelism, worker
  flags and task.
* Redis is read with ``kubectl exec`` and ``redis-cli --json`` in the Redis pod: nothing to
  forward, nothing that outlives the test, and the JSON is parsed, not scraped.
* The task records, besides each item's sha256 in ``results``, how many times each item ran
  (``runs``, in the same MULTI), so "exactly once" is checked where it must hold. A worker is
  caught mid-item deterministically: the task of a pod named in the set ``hold`` writes its
  item to the hash ``held`` and then hangs, so the test deletes or SIGKILLs a worker that is
  certainly in the middle of that item, and finds out who finished it afterwards.
"""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest

from tests.support.wait import wait_until

from .conftest import Operator
from .support import Kubectl, PodWatch, phase, terminated
from .workqueue import Queue, finished, sha256, show, worker_template

pytestmark = [pytest.mark.realnode]

#: Run in a worker pod that shares its process namespace (so that the worker is not PID 1,
#: which ignores a SIGKILL sent from inside its own namespace): SIGKILLs the worker.
KILL_WORKER = """\
import os, signal
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\\0")
    except OSError:
        continue
    if any(a == b"paralleljob-worker" or a.endswith(b"/paralleljob-worker") for a in argv[:2]):
        print(pid, flush=True)
        os.kill(int(pid), signal.SIGKILL)
"""


def _logs(k: Kubectl, pods: list[str]) -> dict[str, str]:
    return {pod: k.run("logs", pod, check=False).stdout for pod in pods}


# ------------------------------------------------------------------ what must be shown


def test_200_items_parallelism_4_each_done_exactly_once(
    operator: Operator, k: Kubectl, queue: Queue, core_v1: Any
) -> None:
    name = "wq-200"
    items = queue.enqueue(1, 200)

    def at_most_4(pods: dict[str, dict[str, Any]]) -> str | None:
        return f"{len(pods)} pods" if len(pods) > 4 else None

    with PodWatch(core_v1, k.ns, name, at_most_4) as watch:
        k.create_pj(name, worker_template(queue.image, ITEM_SECONDS="0.05"), parallelism=4)
        wait_until(lambda: len(k.pods(name)) == 4, timeout=60, what="four worker pods")
        show(k, name, "running")
        assert finished(k, name) == "Complete"
    assert watch.errors == [] and len(watch.created) == 4
    row = k.row(name)
    assert (row.status, row.completions) == ("Complete", "4/1 of 4")
    show(k, name, "complete")
    status = k.status(name)
    assert (status.get("succeeded"), status.get("failed", 0)) == (4, 0)
    assert all(phase(p) == "Succeeded" for p in k.pods(name))
    queue.assert_done(items, once=True)


def test_nothing_lost_when_a_worker_is_deleted_and_another_sigkilled_mid_item(
    operator: Operator, k: Kubectl, queue: Queue
) -> None:
    name = "wq-kill"
    items = queue.enqueue(1, 100)
    # A short visibility timeout, so that the SIGKILLed worker's item is reclaimed soon; a
    # short grace period, after which the deleted worker kills its (hanging) item and hands
    # it back.
    template = worker_template(
        queue.image,
        "--visibility-timeout",
        "5",
        "--grace-seconds",
        "2",
        shared_pids=True,
        ITEM_SECONDS="0.2",
    )
    k.create_pj(name, template, parallelism=4, backoffLimit=6)
    pods = wait_until(
        lambda: [p["metadata"]["name"] for p in k.pods(name)] if len(k.pods(name)) == 4 else None,
        timeout=60,
        what="four worker pods",
    )
    deleted, killed = pods[0], pods[1]
    queue.cli("SADD", "hold", deleted, killed)

    def both_held() -> dict[str, str] | None:
        held = queue.hash("held")
        return held if {deleted, killed} <= set(held) else None

    held = wait_until(
        both_held,
        timeout=120,
        interval=1,
        what=f"{deleted} and {killed} to be in the middle of an item",
    )
    [deleted_id] = queue.pending_of(deleted)
    [killed_id] = queue.pending_of(killed)
    assert (queue.item_of(deleted_id), queue.item_of(killed_id)) == (held[deleted], held[killed])

    k.run("delete", "pod", deleted, "--wait=false")
    # The container ends with its worker, and this exec with it: its status says nothing.
    try:
        kill = k.run(
            "exec", killed, "-c", "worker", "--", "python3", "-c", KILL_WORKER, check=False
        )
        said = kill.stdout + kill.stderr
    except subprocess.TimeoutExpired:
        said = "kubectl exec timed out"
    wait_until(
        lambda: terminated(k.json("get", "pod", killed)),
        timeout=60,
        what=f"{killed}'s container to end (exec: {said})",
    )
    show(k, name, f"{deleted} deleted, {killed}'s worker SIGKILLed")

    assert finished(k, name) == "Complete"
    row = k.row(name)
    status = k.status(name)
    assert status.get("failed") == 2, status
    assert (row.status, row.completions) == ("Complete", f"{status['succeeded']}/1 of 4")
    show(k, name, "complete")
    # Killed by SIGKILL: 128 + 9.
    assert terminated(k.json("get", "pod", killed))["exitCode"] == 137

    runs = queue.assert_done(items, once=False)
    # The two held items were never finished where they were held...
    assert (runs[held[deleted]], runs[held[killed]]) == (1, 1)
    # ...but by another worker, which got them a second time: the deleted worker's handed
    # back at once after its grace period, the killed one's reclaimed after the timeout.
    others = [p["metadata"]["name"] for p in k.pods(name) if p["metadata"]["name"] != killed]
    logs = "\n".join(_logs(k, others).values())
    for entry_id in (deleted_id, killed_id):
        done = re.search(rf"item {entry_id} done in \S+ \(delivery (\d+)\)", logs)
        assert done is not None, f"no other worker logged item {entry_id} done:\n{logs[-3000:]}"
        assert int(done.group(1)) >= 2


def test_scaled_down_mid_run_nothing_lost_and_no_failure_counted(
    operator: Operator, k: Kubectl, queue: Queue, core_v1: Any
) -> None:
    name = "wq-scale"
    items = queue.enqueue(1, 80)
    with PodWatch(core_v1, k.ns, name) as watch:
        k.create_pj(name, worker_template(queue.image, ITEM_SECONDS="0.1"), parallelism=4)
        wait_until(
            lambda: int(queue.cli("HLEN", "results")) >= 30 or k.finished(name),
            timeout=300,
            interval=1,
            what="30 items done",
        )
        assert k.finished(name) is None, "done before the scale-down: make the items slower"
        group = queue.group()
        assert group["lag"] > 0, group
        # The operator deletes three workers: each finishes its item (or hands it back) on
        # SIGTERM and exits 143; the one left drains the rest.
        k.patch_pj(name, {"spec": {"parallelism": 1}})
        show(k, name, "parallelism patched 4 -> 1")
        assert finished(k, name, timeout=400) == "Complete"
    assert watch.errors == []
    assert len(watch.created) == 4, "a scaled-down worker was replaced"
    row = k.row(name)
    assert (row.status, row.completions) == ("Complete", "1/1")
    show(k, name, "complete")
    status = k.status(name)
    assert (status.get("succeeded"), status.get("failed", 0)) == (1, 0)
    queue.assert_done(items, once=True)


def test_a_poison_item_is_dead_lettered_and_the_job_completes(
    operator: Operator, k: Kubectl, queue: Queue
) -> None:
    name = "wq-poison"
    items = queue.enqueue(1, 20)
    poison = "item-007"
    k.create_pj(name, worker_template(queue.image, POISON=poison), parallelism=2)
    assert finished(k, name) == "Complete"
    row = k.row(name)
    assert (row.status, row.completions) == ("Complete", "2/1 of 2")
    assert k.status(name).get("failed", 0) == 0
    [letter] = queue.dead_letters()
    pods = {p["metadata"]["name"] for p in k.pods(name)}
    assert letter["item"] == poison
    assert letter["reason"] == "COMMAND exited with status 3"
    assert letter["deliveries"] == "1"
    assert letter["consumer"] in pods
    assert queue.item_of(letter["id"]) == poison
    results = queue.hash("results")
    good = [i for i in items if i != poison]
    assert sorted(results) == good
    assert all(results[i] == sha256(i) for i in good)
    group = queue.group()
    assert (group["lag"], group["pending"]) == (0, 0), group


@pytest.mark.warnings("BackoffLimitExceeded")
def test_redis_down_pods_fail_with_one_line_and_backoff_limit_applies(
    operator: Operator, k: Kubectl, worker_image: str
) -> None:
    name = "wq-no-redis"
    # No Redis in this namespace: `redis` does not resolve.
    template = worker_template(worker_image, "--retry-seconds", "3")
    k.create_pj(name, template, parallelism=1, backoffLimit=1)
    assert finished(k, name, timeout=180) == "Failed"
    failed = k.condition(name, "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded"
    assert k.status(name).get("failed") == 2
    row = k.row(name)
    assert (row.status, row.completions) == ("Failed", "0/1")
    show(k, name, "failed")
    pods = k.pods(name)
    assert len(pods) == 2
    one_line = re.compile(
        r"paralleljob-worker: error: Redis unreachable for 3s: .*\bredis:6379\b.*"
    )
    for pod in pods:
        ended = terminated(pod)
        assert ended["exitCode"] == 1, ended
        # FallbackToLogsOnError (the example's): the log's tail is the pod's message.
        message = ended.get("message", "").strip().splitlines() or [""]
        assert one_line.fullmatch(message[-1]), ended
        log = k.run("logs", pod["metadata"]["name"]).stdout.strip().splitlines()
        assert one_line.fullmatch(log[-1]), log
