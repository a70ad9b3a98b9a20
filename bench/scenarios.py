"""The scenarios of issue 7, each a round body for any arm, and their sizes."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from tests.support import audit

from . import ceiling
from .observer import JobRecord, Observer, PodRecord
from .runner import USERS, Bench, Body, Outcome
from .stats import percentile, window_rate
from .workloads import INSTANT, LONG, Arm, job, jobs_path, pods_path

# Requests the bench has in flight when it creates many jobs "at once".
CREATE_CONCURRENCY = 50


@dataclass(frozen=True)
class Sizes:
    """How big each scenario is; the defaults are a full run's."""

    rounds: int = 5
    #: Scenario 6's rounds: its built-in rounds take a quarter of an hour each.
    scale_rounds: int = 3
    #: After each deploy, one discarded round per arm of a job this big (0: none).
    warmup_completions: int = 100
    one_job_completions: int = 1000
    one_job_parallelism: int = 100
    many_jobs: int = 200
    many_jobs_completions: int = 5
    reaction_jobs: int = 200
    reaction_rate: float = 20
    scale_to: int = 50
    background_jobs: int = 500
    scale_jobs: int = 2000
    scale_completions: int = 2
    idle_jobs: int = 500
    idle_window: float = 60
    progress_every: float = 15
    #: Scenario 8: the levels of running jobs, each job's pods, the probe jobs per level.
    curve_levels: tuple[int, ...] = (1000, 5000, 10000)
    curve_pods: int = 5
    curve_probes: int = 50
    curve_probe_rate: float = 10
    #: A level is measured once its background's pods have not changed for this long:
    #: every job showing all its pods ready is not enough at 50,000 pods, where kwok's pod
    #: informer lags its own patches by minutes and plays the ready stage again on each
    #: stale event (75,422 status patches for 50,000 pods), keeping the API server and
    #: scheduler busy.
    curve_quiet_s: float = 30


FULL = Sizes()
#: Every scenario once, scaled down (a smoke test).
QUICK = Sizes(
    rounds=1,
    scale_rounds=1,
    warmup_completions=0,
    one_job_completions=20,
    one_job_parallelism=10,
    many_jobs=4,
    many_jobs_completions=2,
    reaction_jobs=10,
    scale_to=5,
    background_jobs=10,
    scale_jobs=10,
    idle_jobs=5,
    idle_window=3,
    progress_every=5,
    curve_levels=(20,),
    curve_probes=5,
    curve_quiet_s=5,
)


def deadline_for(pods: int) -> float:
    """A round's deadline: generous (2 pods/s is far below either controller), so that
    only a controller that stops making progress misses it."""
    return 120 + pods / 2


async def create_jobs(
    bench: Bench,
    arm: Arm,
    namespace: str,
    count: int,
    pods: int,
    *,
    duration: str = INSTANT,
    first: int = 0,
) -> None:
    """``count`` jobs of ``pods`` pods each (all of them in parallel), named job-NNNNN
    from ``first`` on, created at once (CREATE_CONCURRENCY in flight)."""
    slots = asyncio.Semaphore(CREATE_CONCURRENCY)

    async def one(i: int) -> None:
        body = job(arm, f"job-{i:05d}", completions=pods, parallelism=pods, duration=duration)
        async with slots:
            await bench.kube.create(jobs_path(arm, namespace), body)

    await asyncio.gather(*(one(i) for i in range(first, first + count)))


def _pods_by_owner(seen: Observer) -> dict[str, list[PodRecord]]:
    grouped: dict[str, list[PodRecord]] = defaultdict(list)
    for pod in seen.pods.values():
        if pod.owner:
            grouped[pod.owner].append(pod)
    return grouped


def _completed(seen: Observer, name: str) -> JobRecord | None:
    record = seen.job_named(name)
    return record if record is not None and record.complete is not None else None


# ---------------------------------------------------------------- 1. one big job


def one_job(completions: int, parallelism: int) -> Body:
    """Scenario 1 (and the ceiling): steady-state pods/s and makespan of one job."""

    async def body(bench: Bench, arm: Arm, ns: str, seen: Observer) -> Outcome:
        if arm is Arm.CEILING:
            return await ceiling.run(
                bench,
                ns,
                seen,
                pods=completions,
                concurrency=parallelism,
                timeout=deadline_for(completions),
            )
        await bench.kube.create(
            jobs_path(arm, ns), job(arm, "bench", completions=completions, parallelism=parallelism)
        )
        what, timeout = f"the {arm.kind} to complete", deadline_for(completions)
        record = await seen.wait_for(lambda: _completed(seen, "bench"), timeout=timeout, what=what)
        assert record.complete is not None
        times = seen.succeeded_times(seen.job_uid("bench"))
        return Outcome(
            metrics={
                "pods_per_s": window_rate(times),
                "makespan_s": record.complete - record.added,
            },
            finished_pods=len(times),
            series={"succeeded": [t - record.added for t in times]},
        )

    return body


# ---------------------------------------------------------------- 2. many small jobs


def many_jobs(count: int, completions: int) -> Body:
    """Scenario 2: ``count`` jobs of ``completions`` pods, all in parallel, created at
    once: makespan from the first job seen to the last one Complete."""

    async def body(bench: Bench, arm: Arm, ns: str, seen: Observer) -> Outcome:
        timeout = deadline_for(count * completions)
        makespan = await _all_complete(bench, arm, ns, seen, count, completions, timeout)
        times = seen.succeeded_times()
        return Outcome(
            metrics={"makespan_s": makespan, "pods_per_s": window_rate(times)},
            finished_pods=len(times),
        )

    return body


async def _all_complete(
    bench: Bench, arm: Arm, ns: str, seen: Observer, count: int, completions: int, timeout: float
) -> float:
    """``count`` jobs of ``completions`` pods, all in parallel, created at once, until all
    are Complete: the makespan from the first job seen to the last one Complete."""
    await create_jobs(bench, arm, ns, count, completions)
    what = f"{count} {arm.kind}s to complete"
    await seen.wait_for(lambda: seen.complete >= count, timeout=timeout, what=what)
    first = min(j.added for j in seen.jobs.values())
    return max(j.complete for j in seen.jobs.values() if j.complete is not None) - first


# ---------------------------------------------------------------- 3. reaction


def reaction(count: int, rate: float) -> Body:
    """Scenario 3: ``count`` one-pod jobs created at a steady ``rate``: created → first
    pod, and last pod Succeeded → Complete, per job (ms percentiles)."""

    async def body(bench: Bench, arm: Arm, ns: str, seen: Observer) -> Outcome:
        start = time.monotonic()
        creates = []
        for i in range(count):
            # Pacing, not synchronisation: job i is due at start + i/rate.
            await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
            body = job(arm, f"job-{i:05d}", completions=1, parallelism=1)
            creates.append(asyncio.create_task(bench.kube.create(jobs_path(arm, ns), body)))
        await asyncio.gather(*creates)
        what = f"{count} {arm.kind}s to complete"
        await seen.wait_for(lambda: seen.complete >= count, timeout=deadline_for(count), what=what)
        first_pod, complete = reaction_latencies(seen)
        return Outcome(
            metrics={
                "first_pod_p50_ms": percentile(first_pod, 50) * 1000,
                "first_pod_p99_ms": percentile(first_pod, 99) * 1000,
                "complete_p50_ms": percentile(complete, 50) * 1000,
                "complete_p99_ms": percentile(complete, 99) * 1000,
            },
            finished_pods=seen.succeeded,
            series={"first_pod": first_pod, "complete": complete},
        )

    return body


def reaction_latencies(seen: Observer) -> tuple[list[float], list[float]]:
    """Per job: its first pod seen - the job seen; Complete seen - its last pod seen
    Succeeded (seconds)."""
    pods = _pods_by_owner(seen)
    first_pod: list[float] = []
    complete: list[float] = []
    for uid, record in seen.jobs.items():
        own = pods.get(uid, [])
        if own:
            first_pod.append(min(p.added for p in own) - record.added)
        done = [p.succeeded for p in own if p.succeeded is not None]
        if record.complete is not None and done:
            complete.append(record.complete - max(done))
    return first_pod, complete


# ---------------------------------------------------------------- 4. scale up


def scale_up(target: int) -> Body:
    """Scenario 4: a running job (long pods) at parallelism 1 is patched to ``target``:
    the time from the change being seen to ``target`` pods seen."""

    async def body(bench: Bench, arm: Arm, ns: str, seen: Observer) -> Outcome:
        spec = job(arm, "bench", completions=2 * target, parallelism=1, duration=LONG)
        await bench.kube.create(jobs_path(arm, ns), spec)
        await seen.wait_for(lambda: seen.running >= 1, timeout=120, what="the first pod")
        uid = seen.job_uid("bench")
        assert uid is not None
        await bench.kube.patch(jobs_path(arm, ns, "bench"), {"spec": {"parallelism": target}})
        timeout, what = deadline_for(target), f"{target} pods"
        await seen.wait_for(lambda: seen.pods_by_job[uid] >= target, timeout=timeout, what=what)
        changed = seen.jobs[uid].parallelism_seen[target]
        added = sorted(p.added for p in seen.pods.values() if p.owner == uid)
        return Outcome(metrics={"scale_up_s": added[target - 1] - changed}, settle=False)

    return body


# ---------------------------------------------------------------- 5. background load


@asynccontextmanager
async def background(bench: Bench, arm: Arm, count: int) -> AsyncIterator[str]:
    """``count`` one-pod jobs of ``arm`` whose pods run for the whole block, measured
    from when the load is steady: every pod running and every job's status showing it
    (``ready``), so that no round meets the controller still catching up with the
    background's start (500 status writes, at its client's or write budget's pace)."""
    async with bench.namespace(f"bg-{arm.slug}") as ns:
        bench.log(f"background: {count} {arm.label}s with long pods in {ns}")
        async with Observer(bench.kube, pods_path(ns), jobs_path(arm, ns)) as seen:
            await create_jobs(bench, arm, ns, count, 1, duration=LONG)
            timeout, running = deadline_for(count), f"{count} background pods running"
            await seen.wait_for(lambda: seen.running >= count, timeout=timeout, what=running)
            bench.log(f"background: {count} {arm.label} pods running")
            ready = f"{count} background jobs reporting their pod ready"
            await seen.wait_for(lambda: seen.ready >= count, timeout=timeout, what=ready)
        bench.log(f"background: {count} {arm.label}s report their pod ready: steady")
        yield ns


# ---------------------------------------------------------------- 6. scale


def scale(count: int, completions: int) -> Body:
    """Scenario 6: ``count`` small jobs alive at once; all must complete. The
    controller's CPU and peak RSS come from the round's resource sampler."""

    async def body(bench: Bench, arm: Arm, ns: str, seen: Observer) -> Outcome:
        timeout = deadline_for(count * completions) * 2
        makespan = await _all_complete(bench, arm, ns, seen, count, completions, timeout)
        return Outcome(
            metrics={"makespan_s": makespan, "jobs_complete": float(seen.complete)},
            finished_pods=seen.succeeded,
        )

    return body


# ---------------------------------------------------------------- 7. idle cost


def idle(count: int, window: float) -> Body:
    """Scenario 7: ``count`` jobs whose pods run and nothing changes: the controller's
    status writes (and all its calls) per second over ``window`` seconds."""

    async def body(bench: Bench, arm: Arm, ns: str, seen: Observer) -> Outcome:
        await create_jobs(bench, arm, ns, count, 1, duration=LONG)
        timeout, ready = deadline_for(count), f"{count} jobs reporting their pod ready"
        await seen.wait_for(lambda: seen.ready >= count, timeout=timeout, what=ready)
        cursor = audit.AuditCursor(bench.audit_log)
        start = datetime.now(UTC)
        # The measurement itself: what the controller does while nothing happens.
        await asyncio.sleep(window)
        counts = audit.count_events(
            cursor.lines(), start, datetime.now(UTC), users=[USERS[arm]], namespace=ns
        )
        writes = sum(
            n
            for k, n in counts.items()
            if k.resource.endswith("/status") and k.verb in ("patch", "update")
        )
        calls = sum(n for k, n in counts.items() if k.verb != "watch")
        return Outcome(
            metrics={"status_writes_per_s": writes / window, "api_calls_per_s": calls / window},
            settle=False,
        )

    return body
