"""One level of the scale harness: a stub API seeded with N running jobs x 5 running
pods, the real operator started against it as a subprocess, and what it costs until
every job is synced, at rest, and for 50 new jobs.

The clock starts when the operator process is spawned (a restart or failover at that
scale: the new leader knows nothing). Measured, all from outside the operator: wall and
CPU seconds (/proc) until each job's status was written once; VmHWM and VmRSS; the
event loop's lag from its /metrics; /healthz answered as the kubelet probes it; then
the first pod of each of 50 probe jobs after the job's ADDED event reached the
operator's watch. In the memory mode (``traced``) the operator runs under tracemalloc
(traced.py) and the probes are left out: tracing slows it down.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.stub_api import lease, objects, resources
from tests.support.stub_api.apiserver import StubServer
from tests.support.stub_api.objects import BATCH_JOB, JobSeed, JobType
from tests.support.stub_api.record import Recorder
from tests.support.stub_api.store import Change, Kind, Store

from .. import procstat
from ..curve import operator_synced
from ..environment import config_env
from ..kube import ApiError, Credentials, Kube
from ..observer import condition_true
from ..promtext import (
    FULL_GC,
    FULL_GC_BLOCKED,
    LOOP_BLOCKED,
    LOOP_LAG,
    Histogram,
    parse_histogram,
    parse_metrics,
)
from ..stats import percentile
from . import failover, memory

#: The operator's pause histograms a growth reports: the loop's lag, the part of it the
#: operator's own work caused, and its full GC collections.
PAUSE_METRICS = {
    "lag": LOOP_LAG,
    "own": LOOP_BLOCKED,
    "full_gc": FULL_GC,
    "full_gc_own": FULL_GC_BLOCKED,
}
#: How long after its creation the stub runs a pod, in a growth (as kwok starts one).
GROWTH_POD_START_SECONDS = 0.5
TRACED_SCRIPT = Path(__file__).with_name("traced.py")
NAMESPACE_PREFIX = "bench-scale-"
SYSTEM_NAMESPACE = "paralleljob-system"
SAMPLE_SECONDS = 0.5
#: How often ``--current-status`` reads the operator's metrics for every job synced.
METRICS_SYNCED_SECONDS = 0.25
#: The job created as the operator starts: it sorts after every seeded job (failover.py).
RESTART_PROBE_NAME = "zz-restart-probe"
#: Timeline points kept in the results (a 20-minute run samples 1,200).
TIMELINE_POINTS = 150


@dataclass(frozen=True)
class Level:
    jobs: int
    pods_per_job: int = 5
    #: The share of the jobs that are batch/v1 Jobs managed by the operator, in percent.
    batch_percent: int = 0

    @property
    def objects(self) -> int:
        return self.jobs * (1 + self.pods_per_job)


@dataclass(frozen=True)
class Options:
    settle_seconds: float = 10.0
    probes: int = 50
    probe_rate: float = 20.0
    probe_timeout: float = 60.0
    sync_timeout: float = 1200.0
    bookmark_seconds: float = 10.0
    healthz_seconds: float = 5.0
    namespaces: int = 10
    leader_elect: bool = False
    #: Stand by first, then take over (failover.py; implies leader_elect).
    failover: bool = False
    traced: bool = False
    logs: Path = Path("/tmp")
    #: After the probes, this many new jobs are created at ``grow_rate`` per second, and
    #: the stub runs their pods: a running operator's memory growing (scenario 8's levels).
    grow: int = 0
    grow_rate: float = 50.0
    grow_timeout: float = 1200.0
    #: Seconds after it runs that a grown job's pod exits 0 (None: they run on): the
    #: growth then waits for every grown job Complete, a whole lifecycle per pod.
    complete_after: float | None = None
    #: The seeded jobs' statuses lack nothing (as a leader leaves them): a sync writes
    #: none, and every job synced is what the operator's metrics say (scenario 8's
    #: test) rather than every job's status written once.
    current_status: bool = False


@dataclass
class Seeded:
    store: Store
    crd: resources.CustomResource
    jobs: list[JobSeed]
    pod_bytes: float
    job_bytes: float


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def kubeconfig(url: str) -> str:
    """A kubeconfig for the stub (JSON is YAML): plain http, a token no one checks."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "stub", "cluster": {"server": url}}],
            "users": [{"name": "stub", "user": {"token": "scale-harness"}}],
            "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "stub"}}],
            "current-context": "stub",
        }
    )


# -- seeding --------------------------------------------------------------------------
def _job_type(index: int, level: Level, crd: resources.CustomResource) -> JobType:
    batch = level.batch_percent and index % 100 < level.batch_percent
    return BATCH_JOB if batch else objects.parallel_job_type(crd.storage.api_version)


def _pod_names(job: str, count: int) -> list[str]:
    """``count`` distinct names as generateName makes them (five of its characters: two
    of a job's pods got the same one in one run of 150,000)."""
    names: set[str] = set()
    while len(names) < count:
        names.add(f"{job}-{''.join(random.choices('bcdfghjklmnpqrstvwxz2456789', k=5))}")
    return sorted(names)


def seed(level: Level, options: Options, now: datetime) -> Seeded:
    """The store with the namespaces, the CRD, and the level's running jobs and pods,
    its history compacted (as if they had been there long before)."""
    crd, cron = resources.load_crd(), resources.load_crd(resources.CRON_CRD_FILE)
    store = Store([*resources.builtin_kinds(), *crd.kinds, *cron.kinds])
    namespaces = [f"{NAMESPACE_PREFIX}{i:02d}" for i in range(options.namespaces)]
    for name in [*namespaces, SYSTEM_NAMESPACE, "default"]:
        store.create(resources.NAMESPACE, "", {"metadata": {"name": name}})
    for defined in (crd, cron):
        definition = {**defined.definition, "status": resources.crd_status(defined.definition)}
        store.create(resources.CRD, "", definition)
    jobs, pod_bytes, job_bytes = [], 0, 0
    for i in range(level.jobs):
        job_type = _job_type(i, level, crd)
        namespace = namespaces[i % len(namespaces)]
        job = JobSeed(namespace, f"scale-{i:05d}", str(uuid.uuid4()), level.pods_per_job, job_type)
        jobs.append(job)
        kind = resources.JOB if job_type.batch else crd.storage
        body = objects.job_body(job, now, current=options.current_status)
        job_bytes += len(store.create(kind, namespace, body).bare)
        for p, name in enumerate(_pod_names(job.name, job.pods)):
            body = objects.pod_body(
                job, name, str(uuid.uuid4()), now, node=(i * job.pods + p) % 100
            )
            pod_bytes += len(store.create(resources.POD, namespace, body).bare)
    store.compact()
    pods = level.jobs * level.pods_per_job
    return Seeded(store, crd, jobs, pod_bytes / max(pods, 1), job_bytes / max(level.jobs, 1))


# -- the operator process -------------------------------------------------------------------
@dataclass
class OperatorProcess:
    proc: asyncio.subprocess.Process
    metrics_port: int
    liveness_port: int
    log_path: Path
    started: float

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def stop(self) -> int:
        """SIGTERM, and SIGKILL if it has not ended 20 s later; its exit code."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 20)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        return int(self.proc.returncode or 0)


def operator_command(
    options: Options, metrics_port: int, liveness_port: int, dump: Path
) -> list[str]:
    """The Deployment's command (the paralleljob-operator console script), on loopback;
    in the memory mode the same through traced.py."""
    args = [
        "--bind-address=127.0.0.1",
        f"--metrics-port={metrics_port}",
        f"--liveness-port={liveness_port}",
        "--leader-elect" if options.leader_elect else "--no-leader-elect",
    ]
    if options.traced:
        return [sys.executable, str(TRACED_SCRIPT), str(dump), "--", *args]
    return [str(Path(sys.executable).with_name("paralleljob-operator")), *args]


async def start_operator(
    options: Options, config_path: Path, dump: Path, log_path: Path
) -> OperatorProcess:
    metrics_port, liveness_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PJ_", "KUBERNETES_"))}
    env |= config_env() | {"KUBECONFIG": str(config_path), "PYTHONUNBUFFERED": "1"}
    if options.leader_elect:
        env["PJ_LEADER_ELECTION_NAMESPACE"] = SYSTEM_NAMESPACE
    log_file = log_path.open("wb")
    proc = await asyncio.create_subprocess_exec(
        *operator_command(options, metrics_port, liveness_port, dump),
        stdout=log_file,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    log_file.close()
    return OperatorProcess(proc, metrics_port, liveness_port, log_path, time.monotonic())


# -- the level -------------------------------------------------------------------------------
def _mib(value: int | None) -> float | None:
    return round(value / procstat.MIB, 1) if value is not None else None


def _loopback(port: int) -> Kube:
    return Kube(Credentials(f"http://127.0.0.1:{port}"))


def _longest_ms(h: Histogram) -> list[float] | None:
    """The bounds of the bucket holding the longest observation, in ms."""
    top = h.max_range()
    return [round(b * 1000, 1) for b in top] if top else None


def _lag(h: Histogram | None) -> dict[str, Any] | None:
    if h is None:
        return None
    top = h.max_range()
    return {
        "samples": int(h.count),
        "mean_ms": round(h.mean * 1000, 1) if h.mean is not None else None,
        "max_between_s": list(top) if top else None,
    }


def _ms_stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "p50_ms": round(percentile(values, 50) * 1000, 1),
        "p99_ms": round(percentile(values, 99) * 1000, 1),
        "max_ms": round(max(values) * 1000, 1),
    }


def _latencies(starts: dict[str, float], ends: dict[str, float]) -> list[float]:
    """Per uid in both, in the order of ``starts``: its end - its start."""
    return [ends[uid] - t for uid, t in starts.items() if uid in ends]


def probe_figures(created: dict[str, float], recorder: Recorder) -> dict[str, Any]:
    delivered = {uid: recorder.delivered[uid] for uid in created if uid in recorder.delivered}
    after_create = _latencies(created, recorder.first_pod_post)
    return {
        "created": len(created),
        "with_first_pod": len(after_create),
        "first_pod_after_watch": _ms_stats(_latencies(delivered, recorder.first_pod_post)),
        "first_pod_after_create": _ms_stats(after_create),
        "first_status_after_create": _ms_stats(_latencies(created, recorder.first_status_write)),
    }


def _writes_per_job(recorder: Recorder) -> dict[str, int]:
    counts = [recorder.status_writes.get(u, 0) for u in recorder.expected]
    return {"min": min(counts, default=0), "max": max(counts, default=0), "total": sum(counts)}


def thin(points: list[dict[str, float]], most: int) -> list[dict[str, float]]:
    """At most ``most`` points, evenly spaced, the last one kept."""
    if len(points) <= most:
        return points
    step = len(points) / most
    kept = [points[int(i * step)] for i in range(most - 1)]
    return [*kept, points[-1]]


async def _wait_dump(path: Path, sequence: int, timeout: float) -> dict[str, Any] | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError, ValueError):
            data: dict[str, Any] = json.loads(path.read_text())
            if data.get("sequence", 0) >= sequence:
                return data
        await asyncio.sleep(0.2)
    return None


def _baseline_gate(op_ref: list[OperatorProcess], dump: Path) -> Callable[[str], Awaitable[None]]:
    """Holds every request from the first one on (the operator is imported and has
    listed nothing: its own pod informer and kopf both start by asking) until the traced
    operator has written its baseline."""
    baseline: asyncio.Task[None] | None = None

    async def take() -> None:
        op_ref[0].proc.send_signal(signal.SIGUSR1)
        await _wait_dump(dump, 1, 120)

    async def gate(path: str) -> None:
        nonlocal baseline
        if not op_ref:
            return
        if baseline is None:
            baseline = asyncio.create_task(take())
        await asyncio.shield(baseline)

    return gate


#: How long the standby watches after its pod listing before the takeover (its jobs'
#: metadata listing, and a steady watch).
WARM_SECONDS = 3.0


@dataclass
class LevelRun:
    """One level as it runs: the seeded stub and its record, the operator, and what the
    monitors gather meanwhile."""

    level: Level
    options: Options
    seeded: Seeded
    recorder: Recorder
    op: OperatorProcess
    dump: Path
    #: /proc read at the instant the stub saw an event ("synced", "pods_listed").
    samples: dict[str, procstat.Usage] = field(default_factory=dict)
    timeline: list[dict[str, float]] = field(default_factory=list)
    #: Each /healthz probe: (when, how long it took, its status; 0: no answer).
    healthz: list[tuple[float, float, int]] = field(default_factory=list)
    #: The loop lag histogram when every job was synced, once steady, at the end.
    scrapes: dict[str, Histogram | None] = field(default_factory=dict)
    #: The uid of the one-pod job created as the operator starts (a job created during
    #: a restart), unless it fails over or is traced.
    restart_probe: str | None = None

    def since_start(self, t: float | None) -> float | None:
        return round(t - self.op.started, 2) if t else None

    def sampler(self, name: str) -> Callable[[], None]:
        """A callback that reads /proc at once (at the instant the stub saw the event)."""

        def take() -> None:
            sample = procstat.sample(self.op.pid)
            if sample is not None:
                self.samples[name] = sample

        return take

    async def monitor(self) -> None:
        """Samples /proc every half second, a timeline point every second."""
        last_point = 0.0
        while self.op.proc.returncode is None:
            now = time.monotonic()
            sample = procstat.sample(self.op.pid)
            if sample is None:
                return
            if now - last_point >= 1.0:
                last_point = now
                self.timeline.append(
                    {
                        "t": round(now - self.op.started, 2),
                        "cpu_s": round(sample.cpu_seconds, 2),
                        "rss_mib": round(sample.rss_bytes / procstat.MIB, 1),
                        "synced": self.recorder.synced(),
                        "status_writes": sum(self.recorder.status_writes.values()),
                    }
                )
            await asyncio.sleep(SAMPLE_SECONDS)

    async def probe_healthz(self) -> None:
        """GET /healthz as the Deployment's probes do (every few seconds, 5 s timeout)."""
        async with _loopback(self.op.liveness_port) as kube:
            while self.op.proc.returncode is None:
                await asyncio.sleep(self.options.healthz_seconds)
                started = time.monotonic()
                try:
                    await kube.get_text("/healthz", timeout=5)
                    code = 200
                except ApiError as exc:
                    code = exc.status
                except (aiohttp.ClientError, TimeoutError):
                    code = 0
                self.healthz.append((started - self.op.started, time.monotonic() - started, code))

    async def histograms(self, names: Iterable[str]) -> dict[str, Histogram]:
        """The histograms ``names`` from the operator's /metrics now (those it serves)."""
        try:
            async with _loopback(self.op.metrics_port) as kube:
                text = await kube.get_text("/metrics", timeout=60.0)
        except (ApiError, aiohttp.ClientError, TimeoutError):
            return {}
        found = {name: parse_histogram(text, name) for name in names}
        return {name: h for name, h in found.items() if h is not None}

    async def metrics_synced(self) -> None:
        """With ``current_status``: marks every job synced once the operator's metrics
        say it tracks every job, has synced as many, and has none pending."""
        jobs = self.level.jobs
        async with _loopback(self.op.metrics_port) as kube:
            while self.op.proc.returncode is None and self.recorder.synced_at is None:
                with contextlib.suppress(ApiError, aiohttp.ClientError, TimeoutError):
                    text = await kube.get_text("/metrics", timeout=10.0)
                    if operator_synced(parse_metrics(text), jobs):
                        self.recorder.mark_synced()
                        return
                await asyncio.sleep(METRICS_SYNCED_SECONDS)

    async def scrape_lag(self, point: str) -> None:
        self.scrapes[point] = (await self.histograms([LOOP_LAG])).get(LOOP_LAG)

    def new_job(self, name: str, index: int, pods: int) -> JobSeed:
        """A new ParallelJob of ``pods`` pods, in the namespaces in turn by ``index``."""
        job_type = objects.parallel_job_type(self.seeded.crd.storage.api_version)
        namespace = f"{NAMESPACE_PREFIX}{index % self.options.namespaces:02d}"
        return JobSeed(namespace, name, str(uuid.uuid4()), pods, job_type)

    def create(self, job: JobSeed) -> str:
        """``job`` as a user creates it (no status yet); its uid."""
        body = objects.job_body(job, datetime.now(UTC), running=False)
        self.seeded.store.create(self.seeded.crd.storage, job.namespace, body)
        return job.uid

    async def measure(self) -> dict[str, Any]:
        options, op = self.options, self.op
        out: dict[str, Any] = {}
        if options.failover:
            out["failover"] = await self.fail_over()
            if "error" in out["failover"]:
                out["error"] = out["failover"]["error"]
                return out
        exited = asyncio.create_task(op.proc.wait())
        synced = asyncio.create_task(self.recorder.all_synced.wait())
        await asyncio.wait(
            {exited, synced}, timeout=options.sync_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        synced.cancel()
        if exited.done():
            out["error"] = f"the operator exited ({op.proc.returncode}) before every job was synced"
            return out
        exited.cancel()
        out |= self.startup_figures()
        await self.scrape_lag("synced")
        await asyncio.sleep(options.settle_seconds)
        steady = procstat.sample(op.pid)
        out["rss_steady_mib"] = _mib(steady.rss_bytes) if steady else None
        await self.scrape_lag("steady")
        if options.traced:
            op.proc.send_signal(signal.SIGUSR1)
            data = await _wait_dump(self.dump, 2, 600)
            grown = memory.summarize(data, self.level.objects) if data else {"error": "no dump"}
            out["memory"] = grown
        elif out["synced"]:
            out["probes"] = await self.probes()
            await asyncio.sleep(2)  # the probes' own status writes land
            if options.grow:
                out["growth"] = await self.growth()
        final = procstat.sample(op.pid)
        await self.scrape_lag("end")
        if final is not None:
            out["rss_peak_mib"] = _mib(final.hwm_bytes)
            out["rss_end_mib"] = _mib(final.rss_bytes)
            out["cpu_end_s"] = round(final.cpu_seconds, 2)
        at_sync, steady_lag = self.scrapes["synced"], self.scrapes["steady"]
        out["loop_lag"] = {
            "until_synced": _lag(at_sync),
            "at_rest": _lag(steady_lag.minus(at_sync) if steady_lag is not None else None),
            "whole_run": _lag(self.scrapes["end"]),
        }
        return out

    async def fail_over(self) -> dict[str, Any]:
        """Stands the operator by until it has been sent every pod, then fails over to it."""
        recorder, store, timeout = self.recorder, self.seeded.store, self.options.sync_timeout

        def warm() -> bool:
            listed = recorder.pods_listed_at
            return listed is not None and time.monotonic() - listed >= WARM_SECONDS

        if not await lease.hold_until(store, SYSTEM_NAMESPACE, warm, timeout):
            return {"error": "the standby was not sent every pod in time"}
        if recorder.status_writes:
            return {"error": "the standby wrote a job's status"}
        # In the last namespace (see failover.PROBE_NAME).
        probe = self.new_job(failover.PROBE_NAME, self.options.namespaces - 1, 1)
        pid = self.op.pid
        figures = await failover.measure(
            store, recorder, pid, SYSTEM_NAMESPACE, lambda: self.create(probe), timeout
        )
        figures["standby_pods_listed_s"] = self.since_start(recorder.pods_listed_at)
        return figures

    async def probes(self) -> dict[str, Any]:
        """Creates the probe jobs at the probe rate and waits for each one's first pod."""
        options, recorder = self.options, self.recorder
        created: dict[str, float] = {}
        for i in range(options.probes):
            job = self.new_job(f"probe-{i:03d}", i, self.level.pods_per_job)
            recorder.timed.add(job.uid)
            created[job.uid] = recorder.clock()
            self.create(job)
            await asyncio.sleep(1 / options.probe_rate)
        deadline = time.monotonic() + options.probe_timeout
        while time.monotonic() < deadline and not all(
            u in recorder.first_pod_post for u in created
        ):
            await asyncio.sleep(0.05)
        return probe_figures(created, recorder)

    async def growth(self) -> dict[str, Any]:
        """Creates ``options.grow`` jobs at the growth rate, waits until the operator has
        created every one of their pods (which the stub runs; with ``complete_after``,
        until every one of the jobs is Complete) and the settle time more; the
        operator's longest pauses, CPU and RSS meanwhile, and with ``complete_after`` its
        CPU per pod's lifecycle and per event (a pod's or job's write)."""
        options, recorder, pods = self.options, self.recorder, self.level.pods_per_job
        before = await self.histograms(PAUSE_METRICS.values())
        start = procstat.sample(self.op.pid)
        started = time.monotonic()
        creations = recorder.pod_creations
        changes = Counter[str]()

        def count(kind: Kind, _: Change) -> None:
            changes[kind.plural] += 1

        self.seeded.store.observers.append(count)
        grown: list[JobSeed] = []
        for i in range(options.grow):
            grown.append(self.new_job(f"grow-{i:05d}", i, pods))
            self.create(grown[-1])
            await asyncio.sleep(1 / options.grow_rate)
        created_s = time.monotonic() - started
        wanted = creations + options.grow * pods
        deadline = started + options.grow_timeout
        while recorder.pod_creations < wanted and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        pods_s = time.monotonic() - started
        complete_s = None
        if options.complete_after is not None:
            complete_s = await self._grown_complete(grown, started, deadline)
        await asyncio.sleep(options.settle_seconds)  # the last pods run and their status lands
        self.seeded.store.observers.remove(count)
        after = await self.histograms(PAUSE_METRICS.values())
        end = procstat.sample(self.op.pid)
        out: dict[str, Any] = {
            "jobs": options.grow,
            "rate_per_s": options.grow_rate,
            "created_s": round(created_s, 1),
            "pods_created": recorder.pod_creations - creations,
            "pods_created_s": round(pods_s, 1),
            "longest_ms": {
                key: _longest_ms(after[name].minus(before.get(name)))
                for key, name in PAUSE_METRICS.items()
                if name in after
            },
        }
        if options.complete_after is not None:
            out["complete_s"] = complete_s
            # Every write the operator's watches were sent an event of, and its own.
            out["events"] = changes["pods"] + changes[self.seeded.crd.storage.plural]
        if start is not None and end is not None:
            cpu = end.cpu_seconds - start.cpu_seconds
            out["cpu_s"] = round(cpu, 2)
            out["rss_before_mib"] = _mib(start.rss_bytes)
            out["rss_after_mib"] = _mib(end.rss_bytes)
            if complete_s is not None:
                out["cpu_ms_per_pod"] = round(1000 * cpu / (options.grow * pods), 3)
                out["cpu_ms_per_event"] = round(1000 * cpu / max(out["events"], 1), 3)
        if recorder.pod_creations < wanted:
            out["error"] = f"{wanted - recorder.pod_creations} pods not created in time"
        return out

    async def _grown_complete(
        self, grown: list[JobSeed], started: float, deadline: float
    ) -> float | None:
        """Seconds from ``started`` (the growth's start) until every grown job's stored
        status says Complete (None: not by ``deadline``)."""
        store, kind = self.seeded.store, self.seeded.crd.storage
        waiting = {(j.namespace, j.name) for j in grown}
        while waiting and time.monotonic() < deadline:
            waiting = {
                key
                for key in waiting
                if not condition_true(store.get(kind, *key).load().get("status") or {}, "Complete")
            }
            await asyncio.sleep(0.5)
        return None if waiting else round(time.monotonic() - started, 1)

    def startup_figures(self) -> dict[str, Any]:
        """Until every job's status was written once (or the timeout: then how far it got)."""
        recorder, writes = self.recorder, self.recorder.first_status_write
        first_write = min((writes[u] for u in recorder.expected if u in writes), default=None)
        at_sync = self.samples.get("synced") or procstat.sample(self.op.pid)
        listed = self.samples.get("pods_listed")
        synced = recorder.synced_at

        def cpu(sample: procstat.Usage | None) -> float | None:
            return round(sample.cpu_seconds, 2) if sample else None

        return {
            "synced": synced is not None,
            "jobs_synced": recorder.synced(),
            "wall_first_write_s": self.since_start(first_write),
            "wall_pods_listed_s": self.since_start(recorder.pods_listed_at),
            "cpu_pods_listed_s": cpu(listed),
            "wall_synced_s": self.since_start(synced),
            "cpu_synced_s": cpu(at_sync) if synced else None,
            "cpu_at_timeout_s": None if synced else cpu(at_sync),
            "rss_at_sync_mib": _mib(at_sync.rss_bytes) if at_sync else None,
            "hwm_at_sync_mib": _mib(at_sync.hwm_bytes) if at_sync else None,
            "status_writes_per_job_at_sync": _writes_per_job(recorder),
            "restart_probe_first_pod_s": self.since_start(
                recorder.first_pod_post.get(self.restart_probe or "")
            ),
        }

    def traffic(self) -> dict[str, Any]:
        recorder = self.recorder
        lists: dict[str, dict[str, int]] = {}
        for listing in recorder.listings:
            entry = lists.setdefault(
                listing.resource, {"requests": 0, "items": 0, "bytes": 0, "paged": 0}
            )
            entry["requests"] += 1
            entry["items"] += listing.items
            entry["bytes"] += listing.nbytes
            entry["paged"] += int(listing.paged)
        healthz = [d for _, d, _ in self.healthz]
        requests = [
            {"verb": v, "resource": r, "code": c, "count": n}
            for (v, r, c), n in recorder.requests.items()
        ]
        return {
            "status_writes_per_job_end": _writes_per_job(recorder),
            "job_writes": sum(recorder.job_writes.values()),
            "pod_creations": recorder.pod_creations,
            "requests": sorted(requests, key=lambda e: (str(e["resource"]), str(e["verb"]))),
            "unknown_paths": dict(recorder.unknown),
            "lists": lists,
            "watches": [
                {"t": round(t - self.op.started, 2), "resource": r, "query": q}
                for t, r, q in recorder.watches
            ],
            "healthz": {
                "probes": len(healthz),
                "max_s": round(max(healthz), 3) if healthz else None,
                "failed": sum(1 for _, _, code in self.healthz if code != 200),
            },
            "timeline": thin(self.timeline, TIMELINE_POINTS),
        }


async def run_level(level: Level, options: Options) -> dict[str, Any]:
    now = datetime.now(UTC)
    seed_started = time.monotonic()
    seeded = seed(level, options, now)
    seed_seconds = time.monotonic() - seed_started
    recorder = Recorder()
    recorder.expect(j.uid for j in seeded.jobs)
    server = StubServer(
        seeded.store,
        recorder,
        bookmark_seconds=options.bookmark_seconds,
        run_pods_after=GROWTH_POD_START_SECONDS if options.grow else None,
        succeed_pods_after=options.complete_after if options.grow else None,
    )
    await server.start()
    mode = "traced" if options.traced else "plain"
    stem = f"scale-{level.jobs}-{mode}"
    config_path = options.logs / f"{stem}.kubeconfig"
    config_path.write_text(kubeconfig(server.url))
    dump = options.logs / f"{stem}.tracemalloc.json"
    dump.unlink(missing_ok=True)
    op_ref: list[OperatorProcess] = []
    if options.failover:
        lease.seed_lease(seeded.store, SYSTEM_NAMESPACE)
    if options.traced:
        server.gate = _baseline_gate(op_ref, dump)
    op = await start_operator(options, config_path, dump, options.logs / f"{stem}.log")
    op_ref.append(op)
    run = LevelRun(level, options, seeded, recorder, op, dump)
    recorder.on_synced.append(run.sampler("synced"))
    recorder.on_pods_listed.append(run.sampler("pods_listed"))
    if not (options.failover or options.traced):
        probe = run.new_job(RESTART_PROBE_NAME, options.namespaces - 1, 1)
        run.restart_probe = run.create(probe)
    tasks = [asyncio.create_task(run.monitor()), asyncio.create_task(run.probe_healthz())]
    if options.current_status:
        tasks.append(asyncio.create_task(run.metrics_synced()))
    result: dict[str, Any] = {"level": asdict(level) | {"objects": level.objects}, "mode": mode}
    result["sync_timeout_s"] = options.sync_timeout
    # The machine may be shared: its load says how far the figures can be trusted.
    result["load_average_at_start"] = round(os.getloadavg()[0], 2)
    try:
        result |= await run.measure()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        result["operator_exit_code"] = await op.stop()
        await server.stop()
    result["load_average_at_end"] = round(os.getloadavg()[0], 2)
    result |= run.traffic()
    result["seed_seconds"] = round(seed_seconds, 1)
    result["sizes"] = {"pod_bytes": round(seeded.pod_bytes), "job_bytes": round(seeded.job_bytes)}
    result["operator_log"] = str(op.log_path)
    return result
