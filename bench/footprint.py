"""``python -m bench.footprint``: what the operator keeps in memory per job and per pod,
and how often jobs that only wait for a DURATION slot sync, measured in-process on
realistic bodies (issue 23, items 3, 4 and 6). No cluster.

* **Job record**: bytes a ``JobRuntime`` keeps of a job's body once the watch event that
  brought it is gone, and of the whole runtime (tracemalloc), for the bench's job and a
  typical template applied with ``kubectl apply``.
* **PodInfo**: bytes per ``PodInfo`` parsed from a 5.1 KB running pod (five pods a job,
  sharing its namespace, phase and job uid), the pod bodies gone.
* **DURATION re-syncs**: 2,000 running jobs whose only pending change is DURATION, while
  one job waits for the progress budget; the clock is simulated, every job's next sync at
  the delay its ``StatusWriter.write_final`` returned. Syncs per second.

The bodies and the tracemalloc measurement are tests/support/footprint.py's, which the
unit tests of the job record and ``PodInfo`` assert on too (imported from here by some).
"""

from __future__ import annotations

import argparse
import heapq
import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from paralleljob.config import ControllerConfig
from paralleljob.core.job.sync import SyncResult
from paralleljob.jobs.job_runtime import JobRuntime
from paralleljob.jobs.status_writer import StatusWriter
from tests.support import footprint as bodies


class _IdleApi:
    """The API as the simulation needs it: the client has room, no write is made."""

    def has_spare_budget(self) -> bool:
        return True


def duration_syncs_per_second(
    jobs: int = 2_000, seconds: float = 60.0, duration_qps: float = 5.0, warmup: float = 10.0
) -> float:
    """Syncs per second of ``jobs`` jobs whose only pending change is DURATION while one
    other job holds a slot of the progress budget (so no refresh may be written): each
    job syncs again after the delay ``write_final`` returns, on a simulated clock; the
    syncs of ``seconds`` after a ``warmup`` (every job's first sync is in it)."""
    now = [0.0]
    config = ControllerConfig(duration_refresh_qps=duration_qps, progress_write_qps=10.0)
    writer = StatusWriter(_IdleApi(), config, lambda: now[0])  # type: ignore[arg-type]
    assert writer.progress_slots is not None
    writer.progress_slots.slot("a-busy-job", now[0])  # waits for the progress budget
    payload = bodies.job_body(0)
    runtimes = []
    for i in range(jobs):
        body = json.loads(bodies.wire(payload))
        body["metadata"]["uid"] = bodies.fake_uid(3, i)
        runtimes.append(JobRuntime(body, lambda: now[0]))
    queue = [(0.0, i) for i in range(jobs)]
    syncs = 0
    while queue and queue[0][0] < warmup + seconds:
        now[0], i = heapq.heappop(queue)
        rt = runtimes[i]
        stale = replace(rt.job.status, duration_text="13m")
        delay = _run(writer.write_final(rt, SyncResult(stale, refresh_after=60.0)))
        syncs += now[0] >= warmup
        if delay is not None:
            heapq.heappush(queue, (now[0] + max(delay, 0.0), i))
    return syncs / seconds


def _run(coro: Any) -> Any:
    """Runs a coroutine that never awaits anything pending (no API call is made)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("write_final made an API call")


def _bodies(n: int, typical: bool) -> Iterator[str]:
    for i in range(n):
        yield bodies.wire(bodies.job_body(i, typical=typical))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.footprint", description=__doc__)
    parser.add_argument("--jobs", type=int, default=2_000)
    args = parser.parse_args(argv)
    n = args.jobs
    for typical in (False, True):
        payloads = list(_bodies(n, typical))
        size = sum(len(p) for p in payloads) / n
        record, runtime = bodies.record_bytes(payloads)
        label = "typical template" if typical else "bench job"
        print(
            f"job record, {label} ({size / 1000:.1f} KB of JSON): {record:,.0f} B per job "
            f"(the whole runtime: {runtime:,.0f} B)"
        )
    jobs = [bodies.job_body(i) for i in range(n // 5 or 1)]
    pods = [bodies.wire(bodies.pod_body(j, k)) for j in jobs for k in range(5)]
    size = sum(len(p) for p in pods) / len(pods)
    per_pod = bodies.retained(bodies.pod_info, pods)
    print(f"PodInfo ({size / 1000:.1f} KB pods): {per_pod:,.0f} B per pod")
    rate = duration_syncs_per_second(n)
    print(f"DURATION-only syncs of {n:,} jobs while the progress budget is held: {rate:,.1f}/s")


if __name__ == "__main__":
    main()
