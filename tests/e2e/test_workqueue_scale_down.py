"""Graceful scale-down of a work queue on real pods (issue 38, item 2; docs/beyond.md):
``paralleljob-worker --deletion-cost`` marks its own pod's
``controller.kubernetes.io/pod-deletion-cost`` idle (-100) or busy (100) through the API
server, with the RBAC of ``manifests/examples/workqueue-scale-down``, and the operator's
scale-down of a ParallelJob removes the idle workers, so no item is cut short or run twice.

Six workers, three items held until the test opens a gate: three workers hold an item each
(busy), three wait for the items the others hold to be acked (idle, and they do not exit:
something is pending). The test waits until the pods' annotations say so, lowers
parallelism to 3, opens the gate once the three are deleted, and checks that the
three pods deleted were the idle ones, with their idle cost at deletion; that every item
ran exactly once; and that no pod was counted failed. The Redis queue, the worker image and
the task are test_workqueue.py's (tests/e2e/workqueue.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from paralleljob.worker.podcost import BUSY_COST, IDLE_COST
from tests.support.wait import wait_until

from .conftest import Operator
from .support import Kubectl, PodWatch
from .workqueue import Queue, finished, run_task, show

EXAMPLE = Path(__file__).resolve().parents[2] / "manifests" / "examples" / "workqueue-scale-down"
COST = "controller.kubernetes.io/pod-deletion-cost"
WORKERS, ITEMS, KEPT = 6, 3, 3
#: The Redis key whose existence lets the items finish (TASK's ITEM_GATE).
GATE = "gate"


def _template(image: str, **env: str) -> dict[str, Any]:
    """The example's worker pod template (--deletion-cost, POD_NAMESPACE, its service
    account), running the tests' TASK from ``image``."""
    docs = yaml.safe_load_all((EXAMPLE / "scale-down-workqueue-job.yaml").read_text())
    [pj] = [d for d in docs if d]
    template: dict[str, Any] = pj["spec"]["template"]
    [container] = template["spec"]["containers"]
    run_task(container, image, **env)
    assert "--deletion-cost" in container["command"]
    assert template["spec"]["serviceAccountName"] == "paralleljob-worker"
    return template


def _cost(pod: dict[str, Any]) -> str | None:
    annotations = pod["metadata"].get("annotations") or {}
    value = annotations.get(COST)
    return None if value is None else str(value)


def test_scale_down_stops_the_idle_workers_and_no_item_is_redone(
    operator: Operator, k: Kubectl, queue: Queue, core_v1: Any
) -> None:
    name = "wq-cost"
    k.run("apply", "-f", str(EXAMPLE / "rbac.yaml"))
    items = queue.enqueue(1, ITEMS)
    # The cost each pod carried when the watch first saw it being deleted.
    cost_at_deletion: dict[str, str | None] = {}

    def record(pods: dict[str, dict[str, Any]]) -> None:
        for pod in pods.values():
            meta = pod["metadata"]
            if meta.get("deletionTimestamp") and meta["name"] not in cost_at_deletion:
                cost_at_deletion[meta["name"]] = _cost(pod)
        return None

    with PodWatch(core_v1, k.ns, name, check=record) as watch:
        # Each item is held until the gate opens, after the scale-down.
        k.create_pj(name, _template(queue.image, ITEM_GATE=GATE), parallelism=WORKERS)

        def marked() -> tuple[list[str], list[str]] | None:
            pods = [p for p in k.pods(name) if not p["metadata"].get("deletionTimestamp")]
            busy = sorted(p["metadata"]["name"] for p in pods if _cost(p) == str(BUSY_COST))
            idle = sorted(p["metadata"]["name"] for p in pods if _cost(p) == str(IDLE_COST))
            return (busy, idle) if (len(busy), len(idle)) == (ITEMS, WORKERS - ITEMS) else None

        busy, idle = wait_until(
            marked, timeout=240, interval=1, what=f"{ITEMS} busy and {WORKERS - ITEMS} idle"
        )
        # The busy ones are the holders of the items, the idle ones hold nothing.
        assert sorted(c for c in busy if queue.pending_of(c)) == busy
        assert [c for c in idle if queue.pending_of(c)] == []
        assert k.finished(name) is None
        show(k, name, f"{len(busy)} busy, {len(idle)} idle")
        k.patch_pj(name, {"spec": {"parallelism": KEPT}})
        show(k, name, f"parallelism patched {WORKERS} -> {KEPT}")
        # The idle workers deleted before any item is done: none of them may exit first.
        wait_until(
            lambda: len(cost_at_deletion) >= WORKERS - KEPT,
            timeout=120,
            what=f"{WORKERS - KEPT} workers deleted",
        )
        queue.cli("SET", GATE, "1")
        assert finished(k, name, timeout=300) == "Complete"
    assert watch.errors == []
    assert len(watch.created) == WORKERS, "a scaled-down worker was replaced"
    # Exactly the idle workers were deleted, each with its idle cost at that moment.
    assert cost_at_deletion == {pod: str(IDLE_COST) for pod in idle}, (busy, idle)
    status = k.status(name)
    assert (status.get("succeeded"), status.get("failed", 0)) == (KEPT, 0), status
    show(k, name, "complete")
    runs = queue.assert_done(items, once=True)
    assert runs == dict.fromkeys(items, 1)
    # Each item was done by a worker that was busy when parallelism dropped.
    assert set(queue.hash("by").values()) == set(busy)
