"""Which status writes may wait: a running job's progress is written at most once per
batch period.

Upstream's job controller gathers a job's pod events for 1 s (podUpdateBatchPeriod)
before it syncs, so it writes a busy job's status about once a second. This operator
syncs sooner, to create replacement pods at once, and would otherwise write status at
every sync. A write that only reports progress -- pods started, became ready, or
succeeded and were counted -- waits until the batch period since the job's last write
has passed; pod creation does not wait for it. Anything else is written at once:
conditions (so ``Complete`` is never delayed), failures (they drive the back-off),
the start time, the observed generation, the printed status.

Once a job's batch period is over, a progress-only write also waits for a slot of a
budget shared by all jobs (PJ_PROGRESS_WRITE_QPS, slots handed out first come first
served by ratelimit.SlotScheduler). One busy job still writes once a second; 200 busy
jobs no longer write 200 times a second, each reports its progress every 200 / budget
seconds instead. Upstream gets the same effect from its client's QPS 20, which holds a
busy controller's syncs back (and gathers more pod events into each); here only the
writes that nothing waits for are held back, never pod creation, a condition or a
failure. The finalizers of the succeeded pods a write records wait with it: their
pods are done, and they are released once the write lands.
"""

from __future__ import annotations

from ..core import JobStatus, evolve


def progress_only(current: JobStatus, wanted: JobStatus) -> bool:
    """Whether writing ``wanted`` over ``current`` changes only the progress counters
    of successful and running pods, an Indexed job's completed indexes among them (and
    the printed text that follows them)."""
    if wanted == current:
        return False
    progress = evolve(
        wanted,
        active=current.active,
        ready=current.ready,
        terminating=current.terminating,
        succeeded=current.succeeded,
        uncounted_succeeded=current.uncounted_succeeded,
        completed_indexes=current.completed_indexes,
        completions_text=current.completions_text,
        duration_text=current.duration_text,
    )
    return progress == current


def seconds_to_wait(
    current: JobStatus, wanted: JobStatus, last_write: float, now: float, batch_seconds: float
) -> float:
    """How long writing ``wanted`` waits (0 or less: write now)."""
    if not progress_only(current, wanted):
        return 0.0
    return last_write + batch_seconds - now
