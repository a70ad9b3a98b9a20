"""The same workloads at a larger scale, on the simulated kwok node."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.wait import wait_until

from .conftest import Operator
from .support import (
    Kubectl,
    PodWatch,
    held,
    is_active,
    kill_operator_as_pods_finish,
    kwok_template,
    phase,
)

pytestmark = [pytest.mark.kwok]


def test_completions_200_parallelism_40(operator: Operator, k: Kubectl, core_v1: Any) -> None:
    name = "wide"

    def never_more_than_missing(pods: dict[str, dict[str, Any]]) -> str | None:
        succeeded = sum(1 for p in pods.values() if phase(p) == "Succeeded")
        active = sum(1 for p in pods.values() if is_active(p))
        return (
            f"{active} active, {succeeded} succeeded" if active > min(40, 200 - succeeded) else None
        )

    with PodWatch(core_v1, k.ns, name, never_more_than_missing) as watch:
        k.create_pj(name, kwok_template("2s"), completions=200, parallelism=40)
        wait_until(lambda: k.finished(name), timeout=300, what=f"{name} done")
    assert watch.errors == []
    assert watch.max_active == 40
    pods = k.pods(name)
    assert len(pods) == 200 and all(phase(p) == "Succeeded" for p in pods)
    assert held(pods) == []
    status = k.status(name)
    assert (status["succeeded"], status["failed"]) == (200, 0)
    row = k.row(name)
    assert (row.status, row.completions) == ("Complete", "200/200")


def test_work_queue_parallelism_50(operator: Operator, k: Kubectl) -> None:
    name = "queue"
    k.create_pj(name, kwok_template("3s"), parallelism=50)
    wait_until(lambda: len(k.pods(name)) == 50, timeout=60, what="50 pods")
    assert k.row(name).completions in ("0/1 of 50", *(f"{n}/1 of 50" for n in range(1, 51)))
    wait_until(lambda: k.finished(name), timeout=180, what=f"{name} done")
    pods = k.pods(name)
    assert len(pods) == 50, "no pod after the first success"
    row = k.row(name)
    assert (row.status, row.completions) == ("Complete", "50/1 of 50")
    assert held(pods) == []


@pytest.mark.parametrize(
    "operator_settings", [{"PJ_POD_BACKOFF_BASE_SECONDS": "0.1"}], indirect=True
)
@pytest.mark.warnings("BackoffLimitExceeded")
def test_backoff_limit_with_many_failing_pods(operator: Operator, k: Kubectl, core_v1: Any) -> None:
    """Pods fail four at a time; the back-off counts every failure since the last
    success (10 at once would mean 2^9 x base), hence the small base here."""
    name = "failing"
    with PodWatch(core_v1, k.ns, name) as watch:
        k.create_pj(
            name, kwok_template("1s", exit_code=2), completions=50, parallelism=4, backoffLimit=5
        )
        wait_until(lambda: k.finished(name), timeout=120, what=f"{name} to fail")
    assert k.finished(name) == "Failed"
    cond = k.condition(name, "Failed")
    assert cond is not None and cond["reason"] == "BackoffLimitExceeded"
    status = k.status(name)
    # Every pod ever created either failed or was deleted (and is gone) when the job
    # failed: each is counted once.
    assert status["failed"] == len(watch.created) > 5
    assert status["succeeded"] == 0
    assert held(k.pods(name)) == []


@pytest.mark.parametrize(
    "operator_settings", [{"PJ_POD_BACKOFF_BASE_SECONDS": "0.5"}], indirect=True
)
def test_sigkill_at_scale_keeps_counts_exact(operator: Operator, k: Kubectl, core_v1: Any) -> None:
    name = "crashy-wide"
    k.create_pj(name, kwok_template("2s"), completions=300, parallelism=60, backoffLimit=1000)
    with PodWatch(core_v1, k.ns, name) as watch:
        kills = kill_operator_as_pods_finish(
            operator,
            k,
            watch,
            name,
            thresholds=(40, 100, 160, 220),
            phases=("Succeeded",),
            timeout=240,
        )
        wait_until(lambda: k.finished(name), timeout=300, what=f"{name} done")
    assert kills >= 3
    status = k.status(name)
    pods = k.pods(name)
    assert k.finished(name) == "Complete", status
    succeeded = sum(1 for p in pods if phase(p) == "Succeeded")
    assert status["succeeded"] == succeeded == 300
    assert status["failed"] == sum(1 for p in pods if phase(p) == "Failed") == 0
    assert held(pods) == []
