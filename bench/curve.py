"""Scenario 8 (issue 23): a scale curve. Per arm, one background namespace grows through
the levels (running jobs of ``curve_pods`` long pods each); at each level, once steady
(every pod running, every job's status showing all its pods ready) and quiet (no change
to a pod for ``Sizes.curve_quiet_s``), the controller's,
the API server's and etcd's memory and CPU, the operator's longest event-loop pause, and
a round of probe jobs (one pod each, ending at once); then, at the top level, the
controller is SIGKILLed and its replacement timed until it creates a new job's first pod
and has synced every job.

"Synced every job", as seen from outside through the controller's own metrics: its work
queue has been handed every job of the level and is empty. The operator:
``paralleljob_controller_jobs`` (jobs it tracks) >= the level,
``paralleljob_controller_job_syncs_total`` >= the level, and
``paralleljob_controller_jobs_pending_sync`` 0. kube-controller-manager: its job
controller's queue, ``workqueue_adds_total{name="job"}`` >= the level and
``workqueue_depth{name="job"}`` 0. Both controllers queue every job they list at start,
so this holds once each has been taken by a worker (the last few may still be in their
sync: the figure is when the queue emptied, within one sync of every job synced).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial

import aiohttp

from . import procstat, promtext, runner
from .kube import ApiError, Credentials, Kube
from .observer import Observer, RoundFailed
from .promtext import FULL_GC, FULL_GC_BLOCKED, LOOP_BLOCKED, LOOP_LAG, Samples, total
from .runner import CONTROLLER_PROCESS, Bench, Body, Outcome, Round, poll
from .scenarios import Sizes, create_jobs, deadline_for, reaction
from .stats import percentile
from .workloads import LONG, Arm, job, jobs_path, pods_path

#: What the cluster itself needed at each level.
SHARED = {"apiserver": "kube-apiserver", "etcd": "etcd"}
KCM_URL = "https://127.0.0.1:10257"
OPERATOR_METRICS_PORT = 8081
#: The operator's pause histograms and the figure each one's longest observation gives.
PAUSES = {
    LOOP_LAG: "loop_pause_max_ms",
    LOOP_BLOCKED: "loop_blocked_max_ms",
    FULL_GC: "gc_full_max_ms",
    FULL_GC_BLOCKED: "gc_full_blocked_max_ms",
}
#: How long a restarted controller may take to sync every job before the round fails.
RESYNC_TIMEOUT = 1200.0
#: How long to wait for that quiet before measuring anyway (the figures then say so).
SETTLE_TIMEOUT = 1800.0


# ---------------------------------------------------------------- metrics (pure)


def longest_pauses(
    before: Mapping[str, Mapping[float, float]], after: Mapping[str, Mapping[float, float]]
) -> dict[str, float]:
    """Each pause histogram's longest observation between two scrapes, in ms, by its
    figure's name (PAUSES); none for a histogram the operator did not serve."""
    return {
        PAUSES[name]: promtext.longest_observation(before.get(name, {}), now) * 1000
        for name, now in after.items()
        if now
    }


def operator_synced(samples: Samples, jobs: int) -> bool:
    """The operator has been handed every job of the level and its queue is empty."""
    tracked = total(samples, "paralleljob_controller_jobs") or 0
    syncs = total(samples, "paralleljob_controller_job_syncs_total") or 0
    pending = total(samples, "paralleljob_controller_jobs_pending_sync")
    return tracked >= jobs and syncs >= jobs and pending == 0


def kcm_synced(samples: Samples, jobs: int) -> bool:
    """kube-controller-manager's job controller has queued every job and emptied its queue."""
    adds = total(samples, "workqueue_adds_total", name="job") or 0
    depth = total(samples, "workqueue_depth", name="job")
    return adds >= jobs and depth == 0


def success_to_status(seen: Observer) -> list[float]:
    """Per job: its status first counting a succeeded pod - its first pod seen Succeeded
    (seconds)."""
    first_success: dict[str, float] = {}
    for pod in seen.pods.values():
        if pod.owner and pod.succeeded is not None:
            first_success[pod.owner] = min(
                first_success.get(pod.owner, pod.succeeded), pod.succeeded
            )
    return [
        record.succeeded - first_success[uid]
        for uid, record in seen.jobs.items()
        if record.succeeded is not None and uid in first_success
    ]


def live_objects(level: int, pods: int) -> int:
    """Jobs and their pods at a level: what a controller's caches hold."""
    return level * (1 + pods)


# ---------------------------------------------------------------- scraping


class Scraper:
    """The controllers' /metrics: the acting operator's through the API server's pod
    proxy, kube-controller-manager's on its secure port as the bench's admin user (its
    serving certificate is self-signed: hack/cluster-up.sh gives it none)."""

    def __init__(self, bench: Bench, credentials: Credentials) -> None:
        self.bench = bench
        self._kcm = Kube(replace(credentials, server=KCM_URL, verify=False))

    async def __aenter__(self) -> Scraper:
        await self._kcm.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._kcm.__aexit__(*exc)

    async def operator(self) -> Samples:
        pod = self.bench.operator_pod
        port = OPERATOR_METRICS_PORT
        path = f"/api/v1/namespaces/{runner.SYSTEM_NAMESPACE}/pods/{pod}:{port}/proxy/metrics"
        return promtext.parse_metrics(await self.bench.kube.get_text(path))

    async def kcm(self) -> Samples:
        return promtext.parse_metrics(await self._kcm.get_text("/metrics"))

    async def pauses(self, arm: Arm) -> dict[str, dict[float, float]]:
        """The operator's pause histograms now, by name (none for the built-in: no such
        metrics)."""
        if CONTROLLER_PROCESS[arm] != "operator":
            return {}
        samples = await self.operator()
        return {name: promtext.buckets(samples, name) for name in PAUSES}

    async def synced(self, arm: Arm, jobs: int) -> bool:
        try:
            if CONTROLLER_PROCESS[arm] == "operator":
                return operator_synced(await self.operator(), jobs)
            return kcm_synced(await self.kcm(), jobs)
        except (ApiError, aiohttp.ClientError, TimeoutError):
            return False  # not answering yet


# ---------------------------------------------------------------- rounds


def probe(count: int, rate: float) -> Body:
    """Scenario 3's reaction round at a level (``count`` one-pod jobs at ``rate``), plus
    each job's success-to-status latency."""
    inner = reaction(count, rate)

    async def body(bench: Bench, arm: Arm, ns: str, seen: Observer) -> Outcome:
        outcome = await inner(bench, arm, ns, seen)
        latency = success_to_status(seen)
        if latency:
            outcome.metrics["success_to_status_p50_ms"] = percentile(latency, 50) * 1000
        outcome.series["success_to_status"] = latency
        return outcome

    return body


async def scale_curve(
    bench: Bench,
    arm: Arm,
    sizes: Sizes,
    scraper: Scraper,
    record: Callable[[Round], None],
    *,
    restart: bool,
) -> None:
    """Scenario 8 for one arm: a round per level (the probes, with the level's figures
    added), then the restart at the top level reached; each given to ``record`` as it
    ends (a checkpoint: these runs take hours)."""
    pods = sizes.curve_pods
    # The namespace controller and the controllers' finalizer removal (the built-in's
    # at its client's QPS 20) take their time over tens of thousands of pods.
    top = max(sizes.curve_levels) * pods
    async with bench.namespace(f"s8-bg-{arm.slug}", deletion_timeout=900 + top / 5) as ns:
        async with Observer(bench.kube, pods_path(ns), jobs_path(arm, ns)) as seen:
            reporter = asyncio.create_task(_report(bench, arm, seen, pods))
            have = 0
            try:
                for level in sizes.curve_levels:
                    try:
                        record(await _level(bench, arm, sizes, scraper, ns, seen, have, level))
                    except (RoundFailed, ApiError) as exc:
                        bench.log(f"s8 {arm.label} level {level}: FAILED: {exc}")
                        record(Round(f"s8-{level}", arm, 1, error=str(exc)))
                        break
                    have = level
                if restart and have:
                    record(await _restart(bench, arm, scraper, have))
            finally:
                reporter.cancel()
        bench.log(f"s8 {arm.label}: deleting the background ({have} jobs)")


async def _report(bench: Bench, arm: Arm, seen: Observer, pods: int) -> None:
    while True:
        await asyncio.sleep(bench.progress_every)
        bench.log(
            f"  s8 {arm.label} background: {len(seen.jobs)} jobs, {seen.running} pods running, "
            f"{seen.all_ready} jobs with all {pods} pods ready"
        )


async def _level(
    bench: Bench,
    arm: Arm,
    sizes: Sizes,
    scraper: Scraper,
    ns: str,
    seen: Observer,
    have: int,
    level: int,
) -> Round:
    pods = sizes.curve_pods
    bench.log(f"s8 {arm.label}: growing the background from {have} to {level} jobs x {pods} pods")
    pauses_before = await scraper.pauses(arm)
    started = time.monotonic()
    async with procstat.Sampler(bench.finders()) as grow:
        await create_jobs(bench, arm, ns, level - have, pods, duration=LONG, first=have)
        created = time.monotonic() - started
        timeout, what = deadline_for(level * pods) * 2, f"{level * pods} background pods running"
        await seen.wait_for(lambda: seen.running >= level * pods, timeout=timeout, what=what)
        running = time.monotonic() - started
        what = f"{level} background jobs reporting all their pods ready"
        await seen.wait_for(lambda: seen.all_ready >= level, timeout=timeout, what=what)
    steady_s = time.monotonic() - started
    bench.log(f"s8 {arm.label}: {level} jobs steady after {steady_s:.0f}s")
    settled = await _settle(bench, arm, seen, sizes.curve_quiet_s)
    steady = {name: procstat.read_usage(find()) for name, find in bench.finders().items()}
    probes = probe(sizes.curve_probes, sizes.curve_probe_rate)
    result = await bench.run_round(f"s8-{level}", arm, 1, probes)
    pauses_after = await scraper.pauses(arm)
    grown = grow.summary()
    figures: dict[str, float] = {
        "level_jobs": level,
        "live_objects": live_objects(level, pods),
        "created_s": created,
        "running_s": running,
        "steady_s": steady_s,
        **settled,
    }
    for key, name in {"controller": CONTROLLER_PROCESS[arm], **SHARED}.items():
        if name in steady and steady[name].rss_bytes:
            figures[f"{key}_rss_mb"] = steady[name].rss_bytes / 2**20
        if name in grown:
            figures[f"{key}_grow_cpu_s"] = grown[name]["cpu_seconds"]
            figures[f"{key}_grow_peak_rss_mb"] = grown[name]["peak_rss_mb"]
    figures.update(longest_pauses(pauses_before, pauses_after))
    result.metrics = {**figures, **result.metrics}
    return result


async def _settle(bench: Bench, arm: Arm, seen: Observer, quiet_s: float) -> dict[str, float]:
    """Waits until the background's pods have been quiet for ``quiet_s``. Its figures:
    how many pod changes arrived after steady, the time from steady to the last of them,
    and whether the quiet came before ``SETTLE_TIMEOUT`` (1) or not (0)."""
    steady, changes = time.monotonic(), seen.pod_changes
    try:
        await seen.wait_for(
            lambda: seen.pods_quiet_for(quiet_s), timeout=SETTLE_TIMEOUT, what="a quiet background"
        )
        quiet = 1.0
    except RoundFailed as exc:
        bench.log(f"s8 {arm.label}: measuring on a busy background: {exc}")
        quiet = 0.0
    late = seen.pod_changes - changes
    settle_s = max(0.0, seen.last_pod_change - steady) if late else 0.0
    bench.log(
        f"s8 {arm.label}: {late} background pod changes after steady, the last at +{settle_s:.0f}s"
    )
    return {"settle_changes": late, "settle_s": settle_s, "settled": quiet}


def _peak_rss(find: Callable[[], list[int]]) -> procstat.Sampler:
    """The largest RSS of ``find()``'s processes over a block, sampled every half second
    (``.tracks["peak"]``; found again should they be replaced)."""
    return procstat.Sampler({"peak": find})


async def _restart(bench: Bench, arm: Arm, scraper: Scraper, level: int) -> Round:
    """SIGKILL the controller at ``level`` jobs: until its successor leads, creates a new
    job's first pod, and has synced every job; its peak RSS meanwhile."""
    result = Round("s8-restart", arm, 1)
    name = CONTROLLER_PROCESS[arm]
    started = time.monotonic()
    bench.log(f"s8 {arm.label}: restart at {level} jobs: SIGKILL {name}")
    steady = procstat.read_usage(bench.finders()[name]()).rss_bytes
    async with bench.namespace(f"s8-restart-{arm.slug}") as ns:
        try:
            async with Observer(bench.kube, pods_path(ns), jobs_path(arm, ns)) as seen:
                # Its metrics must answer before the kill, or "synced" would never be seen.
                await (scraper.operator() if name == "operator" else scraper.kcm())
                if name == "operator":
                    figures = await _restart_operator(bench, arm, scraper, level, ns, seen)
                else:
                    figures = await _restart_kcm(bench, arm, scraper, level, ns, seen)
            figures["level_jobs"] = level
            figures["steady_rss_mb"] = steady / 2**20
            if steady:
                figures["relist_rss_ratio"] = figures["relist_peak_rss_mb"] * 2**20 / steady
            result.metrics = figures
        except (RoundFailed, ApiError, aiohttp.ClientError, subprocess.CalledProcessError) as exc:
            result.error = str(exc)
            bench.log(f"s8 {arm.label} restart: FAILED: {exc}")
    result.seconds = time.monotonic() - started
    bench.log(f"s8 {arm.label} restart: {result.metrics}")
    return result


async def _first_pod(seen: Observer) -> float:
    await seen.wait_for(lambda: seen.pods, timeout=RESYNC_TIMEOUT, what="the new job's first pod")
    return min(p.added for p in seen.pods.values())


async def _until_synced(scraper: Scraper, arm: Arm, level: int) -> float:
    await poll(
        lambda: scraper.synced(arm, level), timeout=RESYNC_TIMEOUT, what=f"{level} jobs synced"
    )
    return time.monotonic()


async def _restart_operator(
    bench: Bench, arm: Arm, scraper: Scraper, level: int, ns: str, seen: Observer
) -> dict[str, float]:
    old = bench.operator_container
    pids = procstat.container_pids(old)
    if not pids:
        raise RoundFailed(f"no process of the leader's container {old[:12]}")
    killed_at = datetime.now(UTC)
    t0 = time.monotonic()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    await bench.kube.create(jobs_path(arm, ns), job(arm, "probe", completions=1, parallelism=1))
    first_pod = asyncio.create_task(_first_pod(seen))

    async def renewed() -> bool:
        lease = await bench.kube.get(runner.OPERATOR_LEASE_PATH)
        spec = lease.get("spec") or {}
        stamp = str(spec.get("renewTime") or "")
        # A restarted container's release of its pod's Lease (elector.py) leads nothing.
        held = bool(spec.get("holderIdentity"))
        return held and bool(stamp) and datetime.fromisoformat(stamp) > killed_at

    # The new leader: the first to renew the Lease after the kill (the killed one cannot).
    async def found() -> bool:
        with contextlib.suppress(RuntimeError):
            await bench.refresh_operator()
        return bool(bench.operator_container) and bench.operator_container != old

    try:
        await poll(renewed, timeout=300, what="a new leader renewing the Lease")
        leader = time.monotonic()
        await poll(found, timeout=120, what="the new leader's container")
        async with _peak_rss(lambda: procstat.container_pids(bench.operator_container)) as peak:
            synced = await _until_synced(scraper, arm, level)
            first = await first_pod
    finally:
        first_pod.cancel()
    return _restart_figures(t0, leader, first, synced, peak.tracks["peak"].peak_rss_bytes)


async def _gone(pids: list[int], timeout: float = 60) -> None:
    """Returns once none of ``pids`` lives, looked at every 10 ms."""
    deadline = time.monotonic() + timeout
    while any(procstat.alive(pid) for pid in pids):
        if time.monotonic() >= deadline:
            raise RoundFailed(f"processes {pids} still alive after {timeout:.0f}s")
        await asyncio.sleep(0.01)


def _restart_figures(
    t0: float, leader: float, first: float, synced: float, peak: int
) -> dict[str, float]:
    return {
        "leader_after_kill_s": leader - t0,
        "first_pod_after_kill_s": first - t0,
        "first_pod_after_leader_s": first - leader,
        "synced_after_kill_s": synced - t0,
        "synced_after_leader_s": synced - leader,
        "relist_peak_rss_mb": peak / 2**20,
    }


async def _restart_kcm(
    bench: Bench, arm: Arm, scraper: Scraper, level: int, ns: str, seen: Observer
) -> dict[str, float]:
    pid_file = runner.CLUSTER_DIR / "pids" / "kube-controller-manager.pid"
    old = procstat.pid_file_pids(pid_file)
    script = [str(runner.REPO_ROOT / "hack" / "cluster-restart.sh"), "kube-controller-manager"]
    kill = partial(subprocess.run, [*script, "--kill"], stdout=sys.stderr, check=True, timeout=300)
    restart = asyncio.create_task(asyncio.to_thread(kill))
    # The script kills a moment after it starts: a probe created before that would get
    # its pod from the process about to die (a run measured a first pod 27 ms "after").
    await _gone(old)
    t0 = time.monotonic()
    await bench.kube.create(jobs_path(arm, ns), job(arm, "probe", completions=1, parallelism=1))
    first_pod = asyncio.create_task(_first_pod(seen))

    async def started() -> bool:
        if restart.done():
            restart.result()  # raises if the script failed
        now = procstat.pid_file_pids(pid_file)
        return bool(now) and now != old

    try:
        # The "leader" here is the new process: kube-controller-manager runs unelected.
        await poll(started, timeout=300, what="kube-controller-manager started again")
        leader = time.monotonic()
        async with _peak_rss(lambda: procstat.pid_file_pids(pid_file)) as peak:
            synced = await _until_synced(scraper, arm, level)
            first = await first_pod
        await restart
    finally:
        first_pod.cancel()
    return _restart_figures(t0, leader, first, synced, peak.tracks["peak"].peak_rss_bytes)
