"""CronChildren: the ParallelJobs each ParallelCronJob controls, from the job informer's
events, and the owner woken on each change."""

from __future__ import annotations

from typing import Any

from paralleljob.runtime.cron_children import CronChildren


def job(uid: str, owner: str | None, *, finished: bool = False) -> dict[str, Any]:
    refs = (
        [
            {
                "apiVersion": "paralleljob.dev/v1alpha1",
                "kind": "ParallelCronJob",
                "uid": owner,
                "controller": True,
            }
        ]
        if owner
        else []
    )
    conditions = [{"type": "Complete", "status": "True"}] if finished else []
    return {
        "metadata": {"name": f"job-{uid}", "uid": uid, "ownerReferences": refs},
        "status": {"conditions": conditions},
    }


def test_jobs_filed_by_owner_and_each_change_wakes_it() -> None:
    children = CronChildren()
    woken: list[str] = []
    children.changed = woken.append
    children.observe(job("a", "c1"))
    children.observe(job("b", "c1"))
    children.observe(job("c", "c2"))
    children.observe(job("d", None))
    assert sorted(x.name for x in children.of("c1")) == ["job-a", "job-b"]
    assert [x.name for x in children.of("c2")] == ["job-c"]
    assert woken == ["c1", "c1", "c2"]
    children.observe(job("a", "c1", finished=True))
    assert {x.name: x.finished for x in children.of("c1")}["job-a"] == "Complete"
    children.forget("a")
    children.forget("c")
    children.forget("unknown")
    assert [x.name for x in children.of("c1")] == ["job-b"]
    assert children.of("c2") == ()
    assert woken == ["c1", "c1", "c2", "c1", "c1", "c2"]


def test_a_job_released_or_moved_leaves_its_old_owner() -> None:
    children = CronChildren()
    woken: list[str] = []
    children.changed = woken.append
    children.observe(job("a", "c1"))
    children.observe(job("a", "c2"))
    assert children.of("c1") == ()
    assert [x.uid for x in children.of("c2")] == ["a"]
    children.observe(job("a", None))
    assert children.of("c2") == ()
    assert woken == ["c1", "c1", "c2", "c2"]
