"""An in-memory stand-in for the API server and kubelet, driving the pure core.

``Sim.sync()`` runs one sync exactly as the operator's shell does (plan -> pod calls ->
status write 1 -> finalizer removals -> status write 2), with every call succeeding
unless told otherwise. Tests then play kubelet: finish pods, reap deleted ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from paralleljob import constants as c
from paralleljob.core import (
    CoreConfig,
    Event,
    PodOutcome,
    PodPlan,
    SyncInput,
    SyncResult,
    Tracked,
    count_and_enact,
    plan_pods,
    sync_context,
    track,
)
from paralleljob.model import Job, JobSpec, JobStatus, PodInfo

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


@dataclass
class Crash(Exception):
    """Raised by the simulator to stop a sync between two of its API calls."""

    where: str


@dataclass
class Sim:
    spec: JobSpec
    now: datetime = T0
    config: CoreConfig = field(default_factory=CoreConfig)
    job: Job = field(init=False)
    pods: dict[str, PodInfo] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    create_error: str | None = None
    crash_at: str | None = None
    max_active: int = 0
    last: SyncResult | None = None
    last_plan: PodPlan | None = None
    last_tracked: Tracked | None = None
    job_deleted: bool = False

    def __post_init__(self) -> None:
        self.job = Job(namespace="ns", name="job", uid="job-uid", spec=self.spec)

    # -- the operator's shell --------------------------------------------------------
    def sync(self) -> SyncResult:
        ctx = sync_context(
            SyncInput(
                job=self.job, pods=tuple(self.pods.values()), now=self.now, config=self.config
            )
        )
        plan = plan_pods(ctx)
        self.last_plan = plan
        created = 0
        error: str | None = None
        for _ in range(plan.create):
            if self.create_error is not None:
                error = self.create_error
                break
            n = len(self.created)
            uid = f"uid-{n}"
            self.pods[uid] = PodInfo(name=f"job-{n:05d}", uid=uid, created=self.now)
            self.created.append(uid)
            created += 1
        deleted: list[str] = []
        for pod in plan.delete:
            current = self.pods[pod.uid]
            if plan.remove_finalizer_before_delete:
                current = replace(current, has_finalizer=False)
            self.pods[pod.uid] = replace(current, deleting=True, finished_at=self.now)
            self.deleted.append(pod.uid)
            deleted.append(pod.uid)
        tracked = track(ctx, plan, PodOutcome(created, tuple(deleted), error))
        self.last_tracked = tracked
        self._crash("before-status-1")
        self.job = replace(self.job, status=tracked.status)
        self._crash("before-finalizers")
        removed = []
        for pod in tracked.remove_finalizers:
            if pod.uid in self.pods:
                self.pods[pod.uid] = replace(self.pods[pod.uid], has_finalizer=False)
            removed.append(pod.uid)
        self._crash("before-status-2")
        done = count_and_enact(ctx, tracked, removed, plan)
        self.job = replace(self.job, status=done.status)
        self.events.extend(tracked.events)
        self.events.extend(done.events)
        self.job_deleted = self.job_deleted or done.delete_job
        self.max_active = max(self.max_active, len(self.active()))
        self.last = done
        return done

    def _crash(self, where: str) -> None:
        if self.crash_at == where:
            self.crash_at = None
            raise Crash(where)

    def settle(self, limit: int = 20) -> SyncResult:
        """Syncs until a sync changes nothing (no pods made or removed, same status)."""
        for _ in range(limit):
            before = (self.job.status, dict(self.pods))
            done = self.sync()
            if (self.job.status, self.pods) == before:
                return done
        raise AssertionError("the job did not settle")

    # -- kubelet, users ----------------------------------------------------------------
    def active(self) -> list[PodInfo]:
        return [p for p in self.pods.values() if p.active]

    def finish_pods(self, n: int, phase: str, restarts: int = 0) -> list[str]:
        chosen = self.active()[:n]
        assert len(chosen) == n, f"wanted {n} active pods, have {len(chosen)}"
        for pod in chosen:
            self.pods[pod.uid] = replace(pod, phase=phase, finished_at=self.now, restarts=restarts)
        return [p.uid for p in chosen]

    def succeed(self, n: int) -> list[str]:
        return self.finish_pods(n, c.SUCCEEDED)

    def fail(self, n: int) -> list[str]:
        return self.finish_pods(n, c.FAILED)

    def run(self, n: int | None = None, ready: bool = True) -> None:
        """Schedules and starts pending pods."""
        for pod in self.active()[:n]:
            self.pods[pod.uid] = replace(
                pod, phase=c.RUNNING, node_assigned=True, ready=ready, ready_since=self.now
            )

    def reap(self) -> None:
        """Deleted pods without finalizers go away (kubelet kill + API removal)."""
        for uid, pod in list(self.pods.items()):
            if pod.deleting and not pod.has_finalizer:
                del self.pods[uid]

    def user_delete(self, uid: str) -> None:
        self.pods[uid] = replace(self.pods[uid], deleting=True)

    def patch_spec(self, **changes: Any) -> None:
        self.job = replace(
            self.job, spec=replace(self.job.spec, **changes), generation=self.job.generation + 1
        )

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def restart_operator(self) -> None:
        """A new operator process: only what the API server stores survives."""
        # Nothing is kept in memory by the core; the status and pods are the API's.

    @property
    def status(self) -> JobStatus:
        return self.job.status

    def condition(self, ctype: str) -> str | None:
        for cond in self.job.status.conditions:
            if cond.type == ctype:
                return cond.status
        return None

    def reason(self, ctype: str) -> str | None:
        for cond in self.job.status.conditions:
            if cond.type == ctype:
                return cond.reason
        return None

    def with_finalizer(self) -> list[str]:
        return [p.uid for p in self.pods.values() if p.has_finalizer]
