"""spec.restartPolicy through the real sync (Sim): a job whose verdict is Failed starts
again from nothing, with new pods labelled with the attempt, the counts reset and
status.restarts one more, until maxRestarts; then it fails as a Job would. Each pod is
counted once in its attempt, whatever call the operator dies at. This project's own
scenarios: the Job has no such field."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from paralleljob import constants as c
from paralleljob.constants import REASON_RESTARTED
from paralleljob.core.job.job_restart_policy import ATTEMPT_LABEL, JobRestartPolicy
from paralleljob.core.job.model import (
    INDEXED_COMPLETION,
    POD_REPLACEMENT_FAILED,
    JobSpec,
    PodFailureBackoff,
)
from paralleljob.core.job.pod_failure_policy import (
    ACTION_FAIL_JOB,
    REASON_POD_FAILURE_POLICY,
    OnExitCodes,
    PodFailurePolicy,
    PodFailurePolicyRule,
)

from ..fake_api import Crash
from ..sim import CRASH_POINTS, Sim

QUICK = PodFailureBackoff(initial_seconds=1, max_seconds=1)


def spec(max_restarts: int = 2, *, reasons: tuple[str, ...] = (), **more: Any) -> JobSpec:
    """One pod, backoffLimit 0 (its first failure is the verdict), restarts as given."""
    policy = JobRestartPolicy(max_restarts)
    if reasons:
        policy = JobRestartPolicy(max_restarts, frozenset(reasons))
    fields: dict[str, Any] = {
        "parallelism": 1,
        "completions": 1,
        "backoff_limit": 0,
        "pod_failure_backoff": QUICK,
        "job_restart": policy,
    }
    return JobSpec(**{**fields, **more})


def restarted(sim: Sim) -> list[str]:
    return [e.message for e in sim.events if e.reason == REASON_RESTARTED]


def attempt(sim: Sim, uid: str) -> int:
    return sim.pods[uid].attempt


def fail_the_attempt(sim: Sim) -> None:
    """The attempt's pod starts and fails; the job settles."""
    sim.settle()
    sim.run()
    sim.fail(1)
    sim.settle()


def test_a_failed_job_restarts_fresh_until_max_restarts_then_fails() -> None:
    sim = Sim(spec(max_restarts=2))
    fail_the_attempt(sim)
    assert sim.status.restarts == 1
    assert (sim.status.failed, sim.status.succeeded) == (0, 0), "counts reset"
    assert sim.condition(c.COND_FAILED) is None
    assert sim.condition(c.COND_FAILURE_TARGET) is None
    assert sim.status.start_time == sim.job.status.start_time is not None
    assert len(sim.created) == 2, "the new attempt's pod"
    assert [attempt(sim, uid) for uid in sim.created] == [0, 1]
    fail_the_attempt(sim)
    assert sim.status.restarts == 2
    assert [attempt(sim, uid) for uid in sim.created] == [0, 1, 2]
    fail_the_attempt(sim)
    assert sim.status.restarts == 2
    assert sim.reason(c.COND_FAILED) == c.REASON_BACKOFF_LIMIT
    assert sim.status.failed == 1, "the last attempt's failure, once"
    assert len(sim.created) == 3
    assert len(restarted(sim)) == 2
    assert "restart 1 of 2" in restarted(sim)[0]
    assert c.REASON_BACKOFF_LIMIT in restarted(sim)[0]
    assert sim.with_finalizer() == []


def test_the_restarted_attempt_can_complete() -> None:
    sim = Sim(spec(max_restarts=3))
    fail_the_attempt(sim)
    sim.run()
    sim.succeed(1)
    sim.settle()
    assert sim.condition(c.COND_COMPLETE) == "True"
    assert (sim.status.succeeded, sim.status.failed, sim.status.restarts) == (1, 0, 1)


def test_a_reason_the_policy_does_not_name_fails_the_job() -> None:
    sim = Sim(spec(reasons=(c.REASON_DEADLINE,)))
    fail_the_attempt(sim)
    assert sim.reason(c.COND_FAILED) == c.REASON_BACKOFF_LIMIT
    assert sim.status.restarts == 0
    assert restarted(sim) == []


def test_the_deadline_restarts_with_its_clock_started_again() -> None:
    sim = Sim(spec(active_deadline_seconds=10, reasons=(c.REASON_DEADLINE,)))
    sim.settle()
    first_start = sim.status.start_time
    sim.advance(10)
    sim.settle()
    sim.terminate()
    sim.settle()
    assert sim.status.restarts == 1
    assert sim.status.start_time is not None and first_start is not None
    assert (sim.status.start_time - first_start).total_seconds() == 10
    sim.advance(9)
    sim.settle()
    assert sim.condition(c.COND_FAILED) is None, "a new deadline, from the restart"


def test_a_fail_job_rule_does_not_match_the_earlier_attempts_pod_again() -> None:
    """The first attempt's failed pod stays (for its logs); it matched FailJob once and
    must not fail the new attempt at its first sync."""
    rule = PodFailurePolicyRule(ACTION_FAIL_JOB, on_exit_codes=OnExitCodes("In", (42,)))
    sim = Sim(
        spec(
            backoff_limit=6,
            pod_failure_policy=PodFailurePolicy(rules=(rule,)),
            pod_replacement_policy=POD_REPLACEMENT_FAILED,
        )
    )
    sim.settle()
    sim.run()
    sim.fail_with(sim.created[0], 42)
    sim.settle()
    assert sim.status.restarts == 1
    assert REASON_POD_FAILURE_POLICY in restarted(sim)[0]
    assert sim.condition(c.COND_FAILED) is None
    assert len(sim.active()) == 1
    assert sim.pods[sim.created[0]].phase == c.FAILED, "kept"


def test_an_indexed_job_runs_every_index_again() -> None:
    sim = Sim(spec(completion_mode=INDEXED_COMPLETION, completions=3, parallelism=3))
    sim.settle()
    sim.run()
    sim.finish_index(0, c.SUCCEEDED)
    sim.settle()
    assert sim.status.completed_indexes == "0"
    sim.fail_index_with(1, 1)
    sim.settle()
    sim.terminate()
    sim.settle()
    assert sim.status.restarts == 1
    assert sim.status.completed_indexes == ""
    assert sorted(i for i in sim.indexes(sim.active()) if i is not None) == [0, 1, 2]
    assert {attempt(sim, p.uid) for p in sim.active()} == {1}


def test_a_complete_job_never_restarts() -> None:
    sim = Sim(spec())
    sim.settle()
    sim.run()
    sim.succeed(1)
    sim.settle()
    assert sim.condition(c.COND_COMPLETE) == "True"
    assert sim.status.restarts == 0


def test_a_job_without_the_policy_fails_as_a_job() -> None:
    sim = Sim(spec(job_restart=None))
    fail_the_attempt(sim)
    assert sim.reason(c.COND_FAILED) == c.REASON_BACKOFF_LIMIT
    assert sim.status.restarts == 0
    assert ATTEMPT_LABEL not in str(sim.api.calls)


@pytest.mark.parametrize("where", sorted(CRASH_POINTS))
def test_a_crash_at_any_call_restarts_once_and_counts_nothing_twice(where: str) -> None:
    """The operator dies at ``where`` of the syncs that count the failure and restart;
    a new one, knowing only what the API server holds, restarts the job once, and the
    new attempt counts its own pods from zero."""
    sim = Sim(spec(max_restarts=1))
    sim.settle()
    sim.run()
    sim.fail(1)
    sim.crash_at = where
    with pytest.raises(Crash):
        sim.settle()
    sim.restart_operator()
    sim.settle()
    assert sim.status.restarts == 1
    assert (sim.status.failed, sim.status.uncounted_failed) == (0, ())
    assert len(sim.created) == 2
    assert len(restarted(sim)) == 1
    fail_the_attempt(sim)
    assert sim.status.failed == 1
    assert sim.reason(c.COND_FAILED) == c.REASON_BACKOFF_LIMIT


def test_an_earlier_attempts_pod_with_its_finalizer_is_released_uncounted() -> None:
    sim = Sim(spec())
    fail_the_attempt(sim)
    stray = sim.add_pod(c.FAILED, uid="stray")  # attempt 0, the finalizer still on
    sim.settle()
    assert not sim.pods[stray.uid].has_finalizer
    assert (sim.status.failed, sim.status.restarts) == (0, 1)
    assert len(sim.active()) == 1


@pytest.mark.parametrize("phase", [c.PENDING, c.RUNNING])
def test_an_earlier_attempts_pod_seen_late_and_running_is_deleted_uncounted(phase: str) -> None:
    """A create of the failed attempt whose answer was lost: its pod shows up after the
    restart. It is deleted (finalizer first), so that it neither counts nor runs beside
    the new attempt's pod."""
    sim = Sim(spec())
    fail_the_attempt(sim)
    [current] = sim.active()
    stray = sim.add_pod(phase, uid="stray")  # attempt 0, the finalizer still on
    sim.sync()
    assert sim.last_plan is not None and sim.last_plan.reason == "earlier-attempt"
    assert sim.pods[stray.uid].deleting and not sim.pods[stray.uid].has_finalizer
    sim.reap()
    sim.settle()
    assert "stray" not in sim.pods
    assert [p.uid for p in sim.active()] == [current.uid]
    assert (sim.status.failed, sim.status.restarts, sim.status.active) == (0, 1, 1)


def test_a_first_attempt_pod_never_carries_a_templates_attempt_label() -> None:
    """The label is the operator's: one in the template (a Job's; a ParallelJob's stored
    before the CRD refused it) would make the first attempt's pods an earlier attempt's."""
    sim = Sim(spec())
    sim.api.job["spec"]["template"].setdefault("metadata", {})["labels"] = {ATTEMPT_LABEL: "1"}
    sim.settle()
    [pod] = sim.active()
    assert pod.attempt == 0
    sim.run()
    sim.succeed(1)
    sim.settle()
    assert sim.condition(c.COND_COMPLETE) == "True"


def _pods_finished(result: str) -> float:
    labels = {"completion_mode": "NonIndexed", "result": result}
    return REGISTRY.get_sample_value("paralleljob_controller_job_pods_finished_total", labels) or 0


def test_the_pods_finished_metric_counts_the_pod_the_restart_write_counts() -> None:
    sim = Sim(spec(max_restarts=1))
    before = _pods_finished("failed")
    fail_the_attempt(sim)
    assert sim.status.restarts == 1
    assert _pods_finished("failed") - before == 1, "counted by the write that restarted"
    fail_the_attempt(sim)
    assert _pods_finished("failed") - before == 2
