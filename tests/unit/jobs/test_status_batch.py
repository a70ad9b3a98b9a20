"""Which status writes wait for the job's batch period (status_batch.py), and the
controller holding them back: progress waits, everything else is written at once."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from prometheus_client import REGISTRY

from paralleljob import constants as c
from paralleljob.core.job.model import Condition, JobSpec, JobStatus
from paralleljob.jobs.status_batch import progress_only, seconds_to_wait
from tests.unit.sim import Sim

T = datetime(2026, 1, 1, tzinfo=UTC)
RUNNING = JobStatus(
    start_time=T,
    active=3,
    ready=2,
    succeeded=1,
    status_text="Running",
    completions_text="1/5",
    duration_text="3s",
)
COMPLETE = Condition(c.COND_COMPLETE, "True", "CompletionsReached", "", T, T)


@pytest.mark.parametrize(
    ("changes", "waits"),
    [
        ({}, False),  # nothing to write
        ({"active": 4}, True),
        ({"ready": 3, "duration_text": "4s"}, True),
        ({"terminating": 1}, True),
        ({"uncounted_succeeded": ("a", "b")}, True),
        ({"succeeded": 3, "completions_text": "3/5"}, True),
        ({"succeeded": 2, "completed_indexes": "0,2"}, True),  # an Indexed job's progress
        ({"failed_indexes": "1"}, False),
        ({"uncounted_failed": ("a",)}, False),  # failures drive the back-off
        ({"failed": 1}, False),
        ({"failures_since_success": 1, "last_failure_time": T}, False),
        ({"conditions": (COMPLETE,)}, False),  # Complete is never delayed
        ({"completion_time": T}, False),
        ({"status_text": "Complete"}, False),
        ({"observed_generation": 2}, False),  # a spec change is answered at once
        ({"active": 4, "failed": 1}, False),
    ],
    ids=repr,
)
def test_only_progress_of_running_and_successful_pods_waits(
    changes: dict[str, object], waits: bool
) -> None:
    assert progress_only(RUNNING, replace(RUNNING, **changes)) is waits  # type: ignore[arg-type]


def test_progress_waits_until_the_batch_period_since_the_last_write_is_over() -> None:
    wanted = replace(RUNNING, active=4)
    assert seconds_to_wait(RUNNING, wanted, last_write=10.0, now=10.25, batch_seconds=1.0) == 0.75
    assert seconds_to_wait(RUNNING, wanted, last_write=10.0, now=11.0, batch_seconds=1.0) <= 0
    failed = replace(RUNNING, failed=1)
    assert seconds_to_wait(RUNNING, failed, last_write=10.0, now=10.25, batch_seconds=1.0) <= 0


# -- the controller --------------------------------------------------------------------
WRITE, RELEASE = "patch_job_status", "remove_pod_finalizer"


def _calls(sim: Sim) -> list[str]:
    mark = len(sim.api.calls)
    sim.sync()
    return [call.method for call in sim.api.calls[mark:] if call.method in (WRITE, RELEASE)]


def _running(spec: JobSpec, progress_write_qps: float = 0.0) -> Sim:
    sim = Sim(spec, status_batch_seconds=1.0, progress_write_qps=progress_write_qps)
    sim.sync()
    sim.run()
    sim.advance(5)
    sim.sync()  # ready pods: written, the batch period starts now
    return sim


# One job alone is never held back by the progress budget shared by all jobs (its
# default, 10 writes/s, or none).
BUDGETS = pytest.mark.parametrize("budget", [0.0, 10.0])


@BUDGETS
def test_successes_within_the_batch_period_are_recorded_and_released_after_it(
    budget: float,
) -> None:
    sim = _running(JobSpec(parallelism=2, completions=4), budget)
    sim.succeed(1)
    sim.advance(0.5)
    assert _calls(sim) == [], "progress only: the status write and the finalizer wait"
    assert len(sim.with_finalizer()) == 3 and len(sim.active()) == 2, "replaced at once"
    sim.advance(0.5)
    assert _calls(sim)[:2] == [WRITE, RELEASE]
    assert len(sim.with_finalizer()) == 2


@BUDGETS
def test_the_counting_write_after_a_release_waits_for_the_next_period(budget: float) -> None:
    sim = _running(JobSpec(parallelism=2, completions=4), budget)
    sim.succeed(1)
    sim.advance(1)
    assert _calls(sim) == [WRITE, RELEASE], "recorded and released; counting waits"
    assert (sim.status.succeeded, len(sim.status.uncounted_succeeded)) == (0, 1)
    sim.advance(1)
    assert _calls(sim) == [WRITE]
    assert (sim.status.succeeded, sim.status.uncounted_succeeded) == (1, ())


def test_the_last_success_is_counted_and_complete_written_at_once() -> None:
    sim = _running(JobSpec(parallelism=2, completions=2))
    sim.succeed(2)
    sim.advance(0.1)
    assert _calls(sim) == [WRITE, RELEASE, RELEASE, WRITE]
    assert sim.condition(c.COND_COMPLETE) == "True" and sim.status.succeeded == 2


def test_a_failure_is_recorded_at_once() -> None:
    sim = _running(JobSpec(parallelism=2, completions=4, backoff_limit=6))
    sim.fail(1)
    sim.advance(0.1)
    assert _calls(sim) == [WRITE, RELEASE, WRITE], "recorded, released and counted"
    assert (sim.status.failed, sim.status.failures_since_success) == (1, 1)


def _pods_finished() -> float:
    labels = {"completion_mode": "NonIndexed", "result": "succeeded"}
    return REGISTRY.get_sample_value("paralleljob_controller_job_pods_finished_total", labels) or 0


def test_the_metrics_count_each_pod_when_the_write_counting_it_lands() -> None:
    sim = _running(JobSpec(parallelism=2, completions=4))
    before = _pods_finished()
    sim.succeed(1)
    sim.advance(1)
    sim.sync()  # recorded and released; the counting write waits
    sim.advance(1)
    sim.succeed(1)
    sim.sync()  # status write 1 counts the first pod and records the second
    assert _pods_finished() - before == sim.status.succeeded == 1
