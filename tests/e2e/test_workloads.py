"""The seed's four workloads on real busybox pods, read through `kubectl get pj`."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.wait import wait_until

from .conftest import Operator
from .support import Kubectl, PodWatch, busybox_template, held, is_active, phase

pytestmark = [pytest.mark.realnode]

#: Each worker sleeps 2-5s at random, so that they finish one by one.
STAGGERED = "sleep $(( RANDOM % 4 + 2 ))"


def _show(k: Kubectl, name: str, when: str) -> None:
    print(f"\n$ kubectl get pj {name}   # {when}\n{k.get_pj_text(name)}", end="")


@pytest.mark.warnings("BackoffLimitExceeded")
def test_1_single_job_with_backoff_limit_0_runs_exactly_one_pod(
    operator: Operator, k: Kubectl
) -> None:
    k.create_pj(
        "single-job", busybox_template("exit 1"), completions=1, parallelism=1, backoffLimit=0
    )
    wait_until(lambda: k.finished("single-job"), timeout=90, what="single-job to finish")
    assert k.finished("single-job") == "Failed"
    failed = k.condition("single-job", "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded"
    pods = k.pods("single-job")
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    assert phase(pods[0]) == "Failed"
    assert held(pods) == []
    row = k.row("single-job")
    assert (row.status, row.completions) == ("Failed", "0/1")
    assert k.status("single-job")["failed"] == 1
    _show(k, "single-job", "failed")


def test_2_completions_5_parallelism_3(operator: Operator, k: Kubectl, core_v1: Any) -> None:
    def never_more_than_missing(pods: dict[str, dict[str, Any]]) -> str | None:
        succeeded = sum(1 for p in pods.values() if phase(p) == "Succeeded")
        active = sum(1 for p in pods.values() if is_active(p))
        if active > min(3, 5 - succeeded):
            return f"{active} active with {succeeded} succeeded"
        return None

    with PodWatch(core_v1, k.ns, "multi-task-job", never_more_than_missing) as watch:
        k.create_pj("multi-task-job", busybox_template("sleep 3"), completions=5, parallelism=3)
        wait_until(lambda: len(k.pods("multi-task-job")) >= 3, timeout=30, what="three pods")
        row = k.row("multi-task-job")
        assert (row.status, row.completions) == ("Running", "0/5")
        _show(k, "multi-task-job", "running")
        wait_until(lambda: k.finished("multi-task-job"), timeout=120, what="multi-task-job done")
    assert watch.errors == []
    assert watch.max_active == 3
    pods = k.pods("multi-task-job")
    assert len(pods) == 5 and all(phase(p) == "Succeeded" for p in pods)
    assert held(pods) == []
    row = k.row("multi-task-job")
    assert (row.status, row.completions) == ("Complete", "5/5")
    assert row.duration.endswith("s")
    _show(k, "multi-task-job", "complete")


def test_3_and_4_work_queue_parallelism_3_then_patched_to_1_and_2(
    operator: Operator, k: Kubectl, core_v1: Any
) -> None:
    name = "multi-workqueue-job"

    def nothing_new_after_a_success(pods: dict[str, dict[str, Any]]) -> str | None:
        if len(pods) > 3:
            return f"{len(pods)} pods"
        return None

    with PodWatch(core_v1, k.ns, name, nothing_new_after_a_success) as watch:
        k.create_pj(name, busybox_template(STAGGERED), parallelism=3)
        wait_until(lambda: len(k.pods(name)) == 3, timeout=30, what="three pods")
        row = k.row(name)
        assert (row.status, row.completions) == ("Running", "0/1 of 3")
        _show(k, name, "running")
        wait_until(lambda: k.finished(name), timeout=120, what=f"{name} done")
    assert watch.errors == [] and len(watch.created) == 3
    row = k.row(name)
    assert (row.status, row.completions) == ("Complete", "3/1 of 3")
    _show(k, name, "complete")
    duration = row.duration

    k.patch_pj(name, {"spec": {"parallelism": 1}})
    wait_until(lambda: k.row(name).completions == "3/1", timeout=30, what="3/1")
    _show(k, name, "patched to parallelism 1")
    k.patch_pj(name, {"spec": {"parallelism": 2}})
    wait_until(lambda: k.row(name).completions == "3/1 of 2", timeout=30, what="3/1 of 2")
    _show(k, name, "patched to parallelism 2")
    row = k.row(name)
    assert (row.status, row.duration) == ("Complete", duration)
    assert len(k.pods(name)) == 3, "patching a finished job starts nothing"


def test_4_single_work_queue(operator: Operator, k: Kubectl) -> None:
    name = "single-workqueue-job"
    k.create_pj(name, busybox_template("sleep 3"), parallelism=1)
    wait_until(lambda: len(k.pods(name)) == 1, timeout=30, what="one pod")
    row = k.row(name)
    assert (row.status, row.completions) == ("Running", "0/1")
    _show(k, name, "running")
    wait_until(lambda: k.finished(name), timeout=90, what=f"{name} done")
    row = k.row(name)
    assert (row.status, row.completions) == ("Complete", "1/1")
    _show(k, name, "complete")
    assert len(k.pods(name)) == 1
    spec = k.pj(name)["spec"]
    assert spec["parallelism"] == 1 and "completions" not in spec
