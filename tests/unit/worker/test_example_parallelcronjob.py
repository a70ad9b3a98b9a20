"""manifests/examples/parallelcronjob-workqueue as ``kubectl apply -k`` applies it: the base's
Redis and producer, and a ParallelCronJob whose ParallelJobs are exactly the jobs of the
CronJob example (the seed's parallel work queue), but for ``managedBy``, which a ParallelJob
does not need. tests/e2e/test_parallelcronjob_workqueue.py runs it on the cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .examples import one, render

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "manifests" / "examples"


def _relabelled(value: Any) -> Any:
    """``value`` with the CronJob example's name replaced by this one's."""
    if isinstance(value, dict):
        return {k: _relabelled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_relabelled(v) for v in value]
    if value == "cronjob-workqueue":
        return "parallelcronjob-workqueue"
    return value


def test_it_is_the_cronjob_example_with_parallel_jobs() -> None:
    rendered = render(EXAMPLES / "parallelcronjob-workqueue")
    assert sorted(d["kind"] for d in rendered) == [
        "Deployment",
        "Job",
        "ParallelCronJob",
        "Service",
    ]
    cron = one(rendered, "ParallelCronJob")
    batch = one(render(EXAMPLES / "cronjob-workqueue"), "CronJob")
    assert cron["apiVersion"] == "paralleljob.dev/v1alpha1"
    assert cron["metadata"]["name"] == "parallelcronjob-workqueue"
    expected = _relabelled(batch["spec"])
    del expected["jobTemplate"]["spec"]["managedBy"]
    expected["catchUpPolicy"] = "Latest"
    assert cron["spec"] == expected
    assert one(rendered, "Job") == one(render(EXAMPLES / "cronjob-workqueue"), "Job")
