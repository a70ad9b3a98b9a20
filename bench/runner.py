"""What every round shares: a fresh namespace, the observer, the audit window, the
resource sampler, progress lines, and the round's outcome."""

from __future__ import annotations

import asyncio
import secrets
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.support import audit

from . import procstat
from .kube import ApiError, Kube, tolerating
from .observer import Observer, RoundFailed
from .workloads import Arm, jobs_path, pods_path

REPO_ROOT = Path(__file__).resolve().parent.parent
CLUSTER_DIR = REPO_ROOT / ".cluster"
SYSTEM_NAMESPACE = "paralleljob-system"
OPERATOR_SELECTOR = "app.kubernetes.io/component=operator"
#: The leader election Lease of the operator's replicas (PJ_LEADER_ELECTION_LEASE_NAME).
OPERATOR_LEASE = "paralleljob-operator"
OPERATOR_LEASE_PATH = (
    f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NAMESPACE}/leases/{OPERATOR_LEASE}"
)

# The identity each arm's pods are driven by, in the audit log.
USERS = {
    Arm.BUILTIN: audit.JOB_CONTROLLER,
    Arm.OPERATOR: audit.OPERATOR,
    Arm.OPERATOR_JOB: audit.OPERATOR,
    Arm.CEILING: audit.CEILING,
}
#: The process whose CPU and memory count as the controller's in each arm, by its name
#: in :meth:`Bench.finders` (the built-in Job controller shares its process with every
#: other controller of the manager).
CONTROLLER_PROCESS = {
    Arm.BUILTIN: "kube-controller-manager",
    Arm.OPERATOR: "operator",
    Arm.OPERATOR_JOB: "operator",
}
# How long a controller's trailing calls (events, the last status write) may take to
# show in the audit log after the observer saw the round finish.
SETTLE_QUIET_SECONDS = 0.5
SETTLE_LIMIT_SECONDS = 20.0


@dataclass
class Outcome:
    """What a scenario's body measured."""

    metrics: dict[str, float]
    #: Pods that finished (Succeeded) in the round: the divisor of calls per pod.
    finished_pods: int = 0
    #: Raw per-event figures for plots (seconds).
    series: dict[str, list[float]] = field(default_factory=dict)
    #: False for rounds whose pods never finish (nothing to wait out in the audit log).
    settle: bool = True


#: The fields of a round its JSON holds as they are, in the JSON's order.
_JSON_FIELDS = ("namespace", "metrics", "calls", "calls_per_pod", "finished_pods", "usage")


@dataclass
class Round:
    scenario: str
    arm: Arm
    index: int
    metrics: dict[str, float] = field(default_factory=dict)
    series: dict[str, list[float]] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    calls_per_pod: float | None = None
    finished_pods: int = 0
    usage: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None
    #: Where the round ran, and when its audit window ended (None: nothing counted).
    namespace: str = ""
    window_end: datetime | None = None

    def add_late_events(self, lines: Iterable[str], now: datetime) -> None:
        """Counts the Events the round's controller posted about it after its window
        (``lines``: the audit log since the window ended, or more), once."""
        if self.window_end is None:
            return
        counts = audit.count_events(
            lines, self.window_end, now, users=[USERS[self.arm]], namespace=self.namespace
        )
        self.calls.update(audit.late_events(counts, USERS[self.arm]))
        self.calls_per_pod = calls_per_pod(self.calls, self.finished_pods)
        self.window_end = None

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "arm": self.arm.value,
            "round": self.index,
            **{key: getattr(self, key) for key in _JSON_FIELDS},
            "seconds": round(self.seconds, 1),
            "error": self.error,
            "series": {k: [round(v, 4) for v in vs] for k, vs in self.series.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Round:
        """A round as :meth:`to_json` wrote it (its audit window is over)."""
        fields = {key: data[key] for key in (*_JSON_FIELDS, "seconds", "error", "series")}
        return cls(data["scenario"], Arm(data["arm"]), data["round"], **fields)


Body = Callable[["Bench", Arm, str, Observer], Awaitable[Outcome]]


class Bench:
    """The cluster connection and the shared machinery of every round."""

    def __init__(self, kube: Kube, *, progress_every: float, defer_deletion: bool) -> None:
        self.kube = kube
        self.progress_every = progress_every
        # Quick mode lets a round's namespace go while the next round runs (the
        # namespace controller's QPS-limited sweep takes seconds even when it is empty);
        # a measuring run waits for it, so that no deletion overlaps a measurement.
        self.defer_deletion = defer_deletion
        self._deleting: list[str] = []
        self.started = time.monotonic()
        self.audit_log = CLUSTER_DIR / "logs" / "audit.log"
        #: The whole run's audit log, for the Events posted after their round.
        self.run_audit = audit.AuditCursor(self.audit_log)
        self._operator_container = ""
        #: The pod of the acting operator (its /metrics are read through the API server).
        self.operator_pod = ""

    @property
    def operator_container(self) -> str:
        """The acting operator's container ID, as :meth:`refresh_operator` found it."""
        return self._operator_container

    def log(self, message: str) -> None:
        elapsed = int(time.monotonic() - self.started)
        print(
            f"[bench {elapsed // 60:3d}:{elapsed % 60:02d}] {message}", file=sys.stderr, flush=True
        )

    # ---------------------------------------------------------------- processes

    async def refresh_operator(self) -> None:
        """Finds the acting operator's container (after a deploy) for the resource
        sampler: the running pod the leader election Lease names (the standby replica
        only reads the Lease, and is not sampled)."""
        pods = await self.kube.get(
            f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods", labelSelector=OPERATOR_SELECTOR
        )
        running = {
            p["metadata"]["name"]: p
            for p in pods["items"]
            if (p.get("status") or {}).get("phase") == "Running"
        }
        try:
            lease = await self.kube.get(OPERATOR_LEASE_PATH)
        except ApiError as exc:
            raise RuntimeError(f"no Lease {OPERATOR_LEASE} yet: {exc}") from exc
        leader = running.get(str((lease.get("spec") or {}).get("holderIdentity", "")))
        if leader is None:
            raise RuntimeError(f"no running operator pod holds the Lease {OPERATOR_LEASE}")
        container_id = leader["status"]["containerStatuses"][0].get("containerID", "")
        self._operator_container = container_id.rpartition("://")[2]
        self.operator_pod = leader["metadata"]["name"]

    def finders(self) -> dict[str, Callable[[], list[int]]]:
        """The processes whose CPU and memory each round reports."""
        pid_dir = CLUSTER_DIR / "pids"

        def component(name: str) -> Callable[[], list[int]]:
            return lambda: procstat.pid_file_pids(pid_dir / f"{name}.pid")

        container = self._operator_container
        return {
            "operator": lambda: procstat.container_pids(container) if container else [],
            "kube-controller-manager": component("kube-controller-manager"),
            "kube-apiserver": component("kube-apiserver"),
            "etcd": component("etcd"),
            "kwok": component("kwok"),
        }

    # ---------------------------------------------------------------- namespaces

    @asynccontextmanager
    async def namespace(self, purpose: str, *, deletion_timeout: float = 900) -> AsyncIterator[str]:
        """A fresh namespace, deleted afterwards; the block ends once it is gone (within
        ``deletion_timeout``)."""
        name = f"pj-bench-{purpose}-{secrets.token_hex(3)}"
        await self.kube.create(
            "/api/v1/namespaces",
            {"metadata": {"name": name, "labels": {"paralleljob.dev/bench": "true"}}},
        )
        try:
            # Pods are rejected until the namespace's default ServiceAccount exists.
            await poll(
                lambda: self._exists(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
                timeout=60,
                what=f"the default ServiceAccount of {name}",
            )
            yield name
        finally:
            if self.defer_deletion:
                await self._start_deletion(name)
                self._deleting.append(name)
            else:
                await self.delete_namespace(name, timeout=deletion_timeout)

    async def delete_namespace(self, name: str, *, timeout: float = 900) -> None:
        started = time.monotonic()
        await self._start_deletion(name)
        await self._wait_gone(name, timeout=timeout)
        self.log(f"  namespace {name} deleted in {time.monotonic() - started:.1f}s")

    def count_late_events(self, rounds: Iterable[Round]) -> None:
        """Adds to each round the Events its controller posted about it after its
        window, up to now: the end of the run."""
        lines, now = self.run_audit.lines(), datetime.now(UTC)
        for r in rounds:
            r.add_late_events(lines, now)

    async def wait_deletions(self) -> None:
        """Waits for the namespaces whose deletion was deferred to be gone."""
        while self._deleting:
            await self._wait_gone(self._deleting.pop())

    async def _start_deletion(self, name: str) -> None:
        with tolerating(404):
            await self.kube.delete(f"/api/v1/namespaces/{name}")

    async def _wait_gone(self, name: str, *, timeout: float = 900) -> None:
        await poll(
            lambda: self._gone(f"/api/v1/namespaces/{name}"),
            timeout=timeout,
            what=f"namespace {name} to be deleted",
        )

    async def _exists(self, path: str) -> bool:
        return not await self._gone(path)

    async def _gone(self, path: str) -> bool:
        with tolerating(404):
            await self.kube.get(path)
            return False
        return True

    # ---------------------------------------------------------------- rounds

    async def run_round(self, scenario: str, arm: Arm, index: int, body: Body) -> Round:
        """One measured round of ``body`` for ``arm`` in a fresh namespace."""
        result = Round(scenario, arm, index)
        started = time.monotonic()
        self.log(f"{scenario} {arm.label} round {index}: start")
        async with self.namespace(f"{scenario}-{arm.slug}") as ns:
            watched_jobs = None if arm is Arm.CEILING else jobs_path(arm, ns)
            async with Observer(self.kube, pods_path(ns), watched_jobs) as seen:
                cursor = audit.AuditCursor(self.audit_log)
                window_start = datetime.now(UTC)
                reporter = asyncio.create_task(self._report_progress(scenario, arm, seen))
                try:
                    async with procstat.Sampler(self.finders()) as usage:
                        outcome = await body(self, arm, ns, seen)
                        if outcome.settle:
                            await self._settle(USERS[arm], ns)
                    result.metrics = outcome.metrics
                    result.series = outcome.series
                    result.usage = usage.summary()
                    window_end = datetime.now(UTC)
                    counts = audit.count_events(
                        cursor.lines(), window_start, window_end, users=[USERS[arm]], namespace=ns
                    )
                    result.calls = audit.by_user(counts, USERS[arm])
                    result.namespace, result.window_end = ns, window_end
                    result.finished_pods = outcome.finished_pods
                    result.calls_per_pod = calls_per_pod(result.calls, outcome.finished_pods)
                except (RoundFailed, ApiError, ValueError) as exc:
                    result.error = str(exc)
                    self.log(f"{scenario} {arm.label} round {index}: FAILED: {exc}")
                finally:
                    reporter.cancel()
        result.seconds = time.monotonic() - started
        figures = ", ".join(f"{k}={v:.3g}" for k, v in result.metrics.items()) or "no figures"
        self.log(f"{scenario} {arm.label} round {index}: {figures}")
        return result

    async def _report_progress(self, scenario: str, arm: Arm, seen: Observer) -> None:
        while True:
            await asyncio.sleep(self.progress_every)
            self.log(f"  {scenario} {arm.label}: {seen.progress()}")

    async def _settle(self, user: str, namespace: str) -> None:
        """Waits until ``user`` made no call in ``namespace`` for a moment, so that its
        trailing calls (events, the final status write) are counted; gives up after
        SETTLE_LIMIT_SECONDS (a controller that never goes quiet)."""
        tail = audit.AuditCursor(self.audit_log)
        deadline = time.monotonic() + SETTLE_LIMIT_SECONDS
        while time.monotonic() < deadline:
            await asyncio.sleep(SETTLE_QUIET_SECONDS)
            if not any(user in line and namespace in line for line in tail.take()):
                return


def calls_per_pod(calls: dict[str, int], pods: int) -> float | None:
    """API calls per finished pod, watches left out (one per controller, not per pod)."""
    if pods <= 0:
        return None
    return sum(n for key, n in calls.items() if not key.startswith("watch ")) / pods


async def poll(probe: Callable[[], Awaitable[bool]], *, timeout: float, what: str) -> None:
    """Re-evaluates ``probe`` every 0.25 s until it holds; RoundFailed after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not await probe():
        if time.monotonic() >= deadline:
            raise RoundFailed(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.25)
