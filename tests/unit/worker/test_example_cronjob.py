"""manifests/examples/cronjob-workqueue as ``kubectl apply -k`` applies it (rendered with
``kubectl kustomize``): the base's Redis and producer, and a CronJob whose Jobs are the seed's
parallel work queue with the base's worker, named for the operator in ``managedBy``. On the
cluster, tests/e2e/test_cronjob_workqueue.py runs it for real and ``make demo`` shows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from paralleljob import constants as c

from .examples import one, render

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "manifests" / "examples" / "cronjob-workqueue"
BASE = REPO / "manifests" / "examples" / "workqueue"
NAME = "cronjob-workqueue"


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    return render(EXAMPLE)


def base(name: str, kind: str) -> dict[str, Any]:
    return one([d for d in yaml.safe_load_all((BASE / name).read_text()) if d], kind)


def test_it_is_the_base_s_redis_and_producer_plus_the_cronjob(
    rendered: list[dict[str, Any]],
) -> None:
    kustomization = yaml.safe_load((EXAMPLE / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["../workqueue", "cronjob.yaml"]
    assert "namespace" not in kustomization, "the namespace is the user's: kubectl -n"
    assert sorted(d["kind"] for d in rendered) == ["CronJob", "Deployment", "Job", "Service"]
    assert all("namespace" not in d["metadata"] for d in rendered)
    assert render(BASE) == [d for d in rendered if d["kind"] != "CronJob"]


def test_the_cronjob_relaunches_the_seed_s_work_queue_run_by_the_operator(
    rendered: list[dict[str, Any]],
) -> None:
    cron = one(rendered, "CronJob")
    assert cron["metadata"]["name"] == NAME
    spec = cron["spec"]
    assert spec["schedule"] == "* * * * *"
    assert spec["concurrencyPolicy"] == "Forbid"
    # Explicit limits, the successful one above 1 so that the last two runs show.
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (2, 2)
    assert 0 < spec["startingDeadlineSeconds"] < 60, "a late run yields to the next minute's"
    job = spec["jobTemplate"]["spec"]
    assert job["managedBy"] == c.MANAGED_BY
    assert "completions" not in job, "a work queue leaves completions unset"
    assert job["parallelism"] == 3
    # A JobTemplate's selector is always generated (the API server rejects one).
    assert "selector" not in job and "manualSelector" not in job
    # The Jobs and their pods are listed by the same label as the CronJob.
    labels = {"app.kubernetes.io/name": NAME}
    assert cron["metadata"]["labels"] == spec["jobTemplate"]["metadata"]["labels"] == labels
    assert job["template"]["metadata"]["labels"] == labels


def test_the_jobs_are_the_base_s_multi_workqueue_job_but_for_the_name(
    rendered: list[dict[str, Any]],
) -> None:
    job = one(rendered, "CronJob")["spec"]["jobTemplate"]["spec"]
    pj = base("multi-workqueue-job.yaml", "ParallelJob")["spec"]
    assert job.pop("managedBy") == c.MANAGED_BY
    for spec in (job, pj):
        spec["template"]["metadata"]["labels"].pop("app.kubernetes.io/name")
    assert job == pj


def test_make_demo_runs_it_in_a_namespace_of_its_own_two_batches() -> None:
    demo = (REPO / "hack" / "demo.sh").read_text()
    assert "CRONJOB=$EXAMPLES/cronjob-workqueue" in demo
    assert f"CRON_NAME={NAME}\n" in demo
    assert 'show kubectl apply -k "$CRONJOB"' in demo
    # Its Redis and producer are the base's: they would collide with workloads 3 and 4's.
    assert "CRON_NS=${DEMO_CRONJOB_NAMESPACE:-$NS-cronjob}" in demo
    # The producer's batch, then a second one, each waited for and checked.
    producer = base("enqueue-job.yaml", "Job")
    [enqueue] = producer["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in enqueue["env"] if "value" in e}
    first, last = int(env["FIRST"]), int(env["LAST"])
    assert f'watch_cron "$CRON_NAME" {last - first + 1} ' in demo
    assert f'check_cron_job "$CRON_NAME" "" {last - first + 1}\n' in demo
    assert f"seq -f item-%03g {last + 1} 76 " in demo
    assert 'watch_cron "$CRON_NAME" 76 ' in demo
    assert f'check_cron_job "$CRON_NAME" "$before" {76 - last}\n' in demo
