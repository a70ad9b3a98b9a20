"""The operator's Prometheus metrics count what happened (scraped from /metrics)."""

from __future__ import annotations

import pytest

from tests.support.wait import wait_until

from .conftest import Operator
from .support import Kubectl, kwok_template

pytestmark = [pytest.mark.kwok]

P = "paralleljob_controller_"


@pytest.mark.warnings("BackoffLimitExceeded")
def test_metrics_count_the_pods_and_jobs_that_finished(operator: Operator, k: Kubectl) -> None:
    before = operator.metrics()

    def delta(name: str, **labels: str) -> float:
        return _delta(operator, before, name, **labels)

    k.create_pj("fine", kwok_template("1s"), completions=10, parallelism=5)
    k.create_pj("broken", kwok_template("0s", exit_code=3), completions=1, backoffLimit=1)
    wait_until(lambda: k.finished("fine") and k.finished("broken"), timeout=120, what="both done")
    assert (k.finished("fine"), k.finished("broken")) == ("Complete", "Failed")
    # Every pod that finished with its tracking finalizer on loses it; the pod watch
    # shows that after the job's final status write.
    wait_until(
        lambda: (
            delta("terminated_pods_tracking_finalizer_total", event="add")
            == delta("terminated_pods_tracking_finalizer_total", event="delete")
            >= 12
        ),
        timeout=30,
        what="as many finished pods released as finished with their finalizer (>= 12)",
    )
    mode = "NonIndexed"
    assert (
        delta(
            "jobs_finished_total",
            completion_mode=mode,
            result="succeeded",
            reason="CompletionsReached",
        )
        == 1
    )
    assert (
        delta(
            "jobs_finished_total",
            completion_mode=mode,
            result="failed",
            reason="BackoffLimitExceeded",
        )
        == 1
    )
    assert delta("job_pods_finished_total", completion_mode=mode, result="succeeded") == 10
    assert delta("job_pods_finished_total", completion_mode=mode, result="failed") == 2
    new = delta("job_pods_creation_total", reason="new", status="succeeded")
    # The broken job's second pod replaces a failed one (recordJobPodsCreationTotal).
    replaced = delta(
        "job_pods_creation_total", reason="recreate_terminating_or_failed", status="succeeded"
    )
    assert replaced == 1 and new >= 11
    posted = delta("api_requests_total", verb="POST", resource="pods", code="201")
    assert posted == new + replaced
    after = operator.metrics()
    syncs = sum(v for (n, _), v in after.items() if n == f"{P}job_syncs_total")
    assert syncs >= 4
    assert after[("process_resident_memory_bytes", frozenset())] > 0


def _delta(
    operator: Operator,
    before: dict[tuple[str, frozenset[tuple[str, str]]], float],
    name: str,
    **labels: str,
) -> float:
    key = (f"{P}{name}", frozenset(labels.items()))
    return operator.metrics().get(key, 0.0) - before.get(key, 0.0)
