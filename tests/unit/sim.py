"""The scenario simulator: the operator's real :class:`~paralleljob.jobs.controller.Controller`
against an in-memory API server (:class:`FakeApi`), on a clock the test holds.

``Sim.sync()`` hands the controller the newest job (as the job watch would) and runs one
:meth:`Controller.sync`, every call succeeding unless told otherwise (``create_error``,
``crash_at``, or the fake's own faults); it returns the core's result. Tests then play
kubelet and users: finish pods, reap deleted ones, edit the spec. A crash loses the
operator's memory: a new controller, knowing only what the API server stores, takes over.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from paralleljob import constants as c
from paralleljob.config import ControllerConfig, CoreConfig
from paralleljob.core.event import Event
from paralleljob.core.job.job_restart_policy import JobRestartPolicy
from paralleljob.core.job.kind import PARALLELJOB
from paralleljob.core.job.model import (
    Job,
    JobSpec,
    JobStatus,
    PodInfo,
    SuccessPolicy,
    parse_job,
    status_to_dict,
)
from paralleljob.core.job.pod_failure_policy import (
    ContainerStatus,
    PodCondition,
    PodFailureFacts,
    PodFailurePolicy,
)
from paralleljob.core.job.sync import PodPlan, SyncResult
from paralleljob.jobs.controller import Controller
from paralleljob.jobs.job_runtime import JobRuntime
from paralleljob.jobs.job_sync import Clock
from paralleljob.runtime.api import ApiError
from paralleljob.timeutil import format_time

from .fake_api import Crash, FakeApi, FakeRecorder, JsonDict
from .indexed_pods import indexed_pod

COMPLETION_INDEX_ANNOTATION = PARALLELJOB.completion_index_key
INDEX_FAILURE_COUNT_ANNOTATION = PARALLELJOB.index_failure_count_key
INDEX_IGNORED_FAILURE_COUNT_ANNOTATION = PARALLELJOB.index_ignored_failure_count_key

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
#: When the pods a test adds as already finished did (upstream's testFinishedAt).
EPOCH = datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)

#: The named crash points of ``Sim.crash_at``: the nth call of a method in the next sync.
CRASH_POINTS = {
    "before-status-1": ("patch_job_status", 1),
    "before-finalizers": ("remove_pod_finalizer", 1),
    "before-status-2": ("patch_job_status", 2),
}


class Sim:
    def __init__(
        self,
        spec: JobSpec,
        now: datetime = T0,
        config: CoreConfig | None = None,
        status_batch_seconds: float = 0.0,
        progress_write_qps: float = 0.0,
    ):
        self.spec = spec
        self.now = now
        self.config = config or CoreConfig()
        # Scenarios check each sync's writes by default; status batching has its own tests.
        self.status_batch_seconds = status_batch_seconds
        self.progress_write_qps = progress_write_qps
        self.api = FakeApi(self._body(Job("ns", "job", "job-uid", spec)), now=lambda: self.now)
        self.recorder = FakeRecorder()
        self.max_active = 0
        self.last_plan: PodPlan | None = None
        self._crash_at: str | None = None
        self._create_error: str | None = None
        self.restart_operator()

    # -- the operator ------------------------------------------------------------------
    def restart_operator(self) -> None:
        """A new operator process: only what the API server stores survives."""
        clock = Clock(now=lambda: self.now, monotonic=lambda: self.now.timestamp())
        self.api.recover()
        self.controller = Controller(
            self.api,
            self.recorder,
            ControllerConfig(
                core=self.config,
                status_batch_seconds=self.status_batch_seconds,
                progress_write_qps=self.progress_write_qps,
            ),
            self.api.pods_of,
            clock,
        )
        self.runtime = JobRuntime(copy.deepcopy(self.api.job), clock.monotonic)

    def sync(self) -> SyncResult:
        self.runtime.offer(copy.deepcopy(self.api.job))  # the job watch's newest event
        try:
            report = asyncio.run(self.controller.syncer.sync(self.runtime))
        except Crash:
            self._crash_at = None
            self.restart_operator()
            raise
        self.last_plan = report.plan
        self.max_active = max(self.max_active, len(self.active()))
        assert report.result is not None, "a simulated job needs no preparing write"
        return report.result

    def settle(self, limit: int = 20) -> SyncResult:
        """Syncs until a sync changes nothing (no pods made or removed, same status)."""
        for _ in range(limit):
            before = (self.job.status, dict(self.pods))
            done = self.sync()
            if (self.job.status, self.pods) == before:
                return done
        raise AssertionError("the job did not settle")

    @property
    def crash_at(self) -> str | None:
        """The operator dies at this point (see CRASH_POINTS) of the next sync reaching it."""
        return self._crash_at

    @crash_at.setter
    def crash_at(self, where: str | None) -> None:
        self._crash_at = where
        if where is not None:
            method, nth = CRASH_POINTS[where]
            self.api.crash(method=method, nth=nth)

    @property
    def create_error(self) -> str | None:
        """While set, the API server rejects the job's pods with this message."""
        return self._create_error

    @create_error.setter
    def create_error(self, message: str | None) -> None:
        self._create_error = message
        if message is None:
            self.api.heal("create_pod")
        else:
            self.api.fail("create_pod", ApiError(422, "Invalid", message))

    # -- what the API server holds -----------------------------------------------------
    @property
    def job(self) -> Job:
        return parse_job(self.api.job)

    @job.setter
    def job(self, job: Job) -> None:
        self.api.update_job(self._body(job))

    def _body(self, job: Job) -> JsonDict:
        """``job`` as the API server stores it."""
        spec = job.spec
        meta: JsonDict = {
            "namespace": job.namespace,
            "name": job.name,
            "uid": job.uid,
            "generation": job.generation,
        }
        if job.deleting:
            meta["deletionTimestamp"] = format_time(self.now)
        template = {"restartPolicy": spec.restart_policy, "containers": [{"name": "main"}]}
        return {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND,
            "metadata": meta,
            "spec": {
                "parallelism": spec.parallelism,
                "completions": spec.completions,
                "backoffLimit": spec.backoff_limit,
                "activeDeadlineSeconds": spec.active_deadline_seconds,
                "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
                "suspend": spec.suspend,
                "completionMode": spec.completion_mode,
                "podReplacementPolicy": spec.pod_replacement_policy,
                "successPolicy": _success_policy(spec.success_policy),
                "backoffLimitPerIndex": spec.backoff_limit_per_index,
                "maxFailedIndexes": spec.max_failed_indexes,
                "podFailurePolicy": _pod_failure_policy(spec.pod_failure_policy),
                "managedBy": spec.managed_by,
                "podFailureBackoff": _pod_failure_backoff(spec),
                "podStartDeadlineSeconds": spec.pod_start_deadline_seconds,
                "restartPolicy": _job_restart(spec.job_restart),
                "template": {"spec": template},
            },
            "status": status_to_dict(job.status),
        }

    @property
    def pods(self) -> dict[str, PodInfo]:
        return self.api.pods

    @pods.setter
    def pods(self, pods: dict[str, PodInfo]) -> None:
        self.api.pods = pods

    @property
    def created(self) -> list[str]:
        return self.api.created

    @created.setter
    def created(self, uids: list[str]) -> None:
        self.api.created = uids

    @property
    def events(self) -> list[Event]:
        return self.recorder.events

    @property
    def job_deleted(self) -> bool:
        return any(call.method == "delete_job" for call in self.api.calls)

    @property
    def status(self) -> JobStatus:
        return self.job.status

    def condition(self, ctype: str) -> str | None:
        for cond in self.status.conditions:
            if cond.type == ctype:
                return cond.status
        return None

    def reason(self, ctype: str) -> str | None:
        for cond in self.status.conditions:
            if cond.type == ctype:
                return cond.reason
        return None

    def with_finalizer(self) -> list[str]:
        return [p.uid for p in self.pods.values() if p.has_finalizer]

    # -- kubelet, users ----------------------------------------------------------------
    def active(self) -> list[PodInfo]:
        return [p for p in self.pods.values() if p.active]

    def finish_pods(self, n: int, phase: str, restarts: int = 0) -> list[str]:
        chosen = self.active()[:n]
        assert len(chosen) == n, f"wanted {n} active pods, have {len(chosen)}"
        for pod in chosen:
            self.pods[pod.uid] = replace(pod, phase=phase, finished_at=self.now, restarts=restarts)
        return [p.uid for p in chosen]

    def fail_with(
        self,
        uid: str,
        exit_code: int | None = None,
        *,
        conditions: tuple[str, ...] = (),
        container: str = "main",
    ) -> str:
        """The kubelet fails the pod ``uid``: its container ``container`` exited with
        ``exit_code`` (None: no terminated container), with the True pod ``conditions``
        (DisruptionTarget, say)."""
        pod = self.pods[uid]
        self.pods[uid] = replace(
            pod,
            phase=c.FAILED,
            finished_at=self.now,
            failure=failure_facts(pod, exit_code, conditions=conditions, container=container),
        )
        return uid

    def fail_index_with(self, index: int, exit_code: int | None = None, **kw: Any) -> str:
        """The active pod of ``index`` fails (see fail_with)."""
        [pod] = [p for p in self.active() if p.completion_index == index]
        return self.fail_with(pod.uid, exit_code, **kw)

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

    def terminate(self) -> list[str]:
        """The kubelet ends the deleted pods still running: they fail (their finalizer,
        if any, stays until the operator removes it)."""
        ended = [p for p in self.pods.values() if p.terminating]
        for pod in ended:
            self.pods[pod.uid] = replace(pod, phase=c.FAILED, finished_at=self.now)
        return [p.uid for p in ended]

    # -- Indexed jobs --------------------------------------------------------------------
    def add_pod(
        self,
        phase: str,
        index: int | str | None = None,
        *,
        uid: str | None = None,
        finalizer: bool = True,
        deleting: bool = False,
        ready: bool = False,
        finished_at: datetime | None = None,
        name: str | None = None,
        failure_count: int | None = None,
        ignored_count: int | None = None,
        exit_code: int | None = None,
        conditions: tuple[str, ...] = (),
        container: str = "main",
    ) -> PodInfo:
        """A pod of the job that is already there (upstream's setPodsStatuses and
        setPodsStatusesWithIndexes): ``index`` as its completion-index annotation holds it
        (a str such as "invalid" is an annotation that does not parse), with the index's
        ``failure_count`` and ``ignored_count`` annotations when given. A finished pod
        finished long ago, so that it starts no back-off (upstream's testFinishedAt). A
        failed pod's container ``container`` exited with ``exit_code``, and it has the
        True pod ``conditions``, as fail_with has them."""
        uid = uid or f"pre-{len(self.pods)}"
        annotations = {} if index is None else {COMPLETION_INDEX_ANNOTATION: str(index)}
        if failure_count is not None:
            annotations[INDEX_FAILURE_COUNT_ANNOTATION] = str(failure_count)
        if ignored_count is not None:
            annotations[INDEX_IGNORED_FAILURE_COUNT_ANNOTATION] = str(ignored_count)
        pod = indexed_pod(
            PodInfo(
                name=name or f"job-{uid}",
                uid=uid,
                phase=phase,
                deleting=deleting,
                has_finalizer=finalizer,
                ready=ready,
                ready_since=self.now if ready else None,
                node_assigned=phase != c.PENDING,
                created=self.now,
                finished_at=finished_at or (EPOCH if phase in (c.SUCCEEDED, c.FAILED) else None),
                namespace="ns",
                label_uid="job-uid",
                controller_uid="job-uid",
            ),
            annotations,
        )
        if phase == c.FAILED or deleting:
            facts = failure_facts(pod, exit_code, conditions=conditions, container=container)
            pod = replace(pod, failure=facts)
        self.pods[uid] = pod
        return pod

    def indexes(self, pods: list[PodInfo] | None = None) -> list[int | None]:
        """The completion indexes of ``pods`` (the active ones by default), sorted."""
        chosen = self.active() if pods is None else pods
        return sorted((p.completion_index for p in chosen), key=lambda ix: -1 if ix is None else ix)

    def created_indexes(self, since: int = 0) -> list[int]:
        """The completion indexes of the pods created (from the ``since``-th on) still
        there, in order (-1: none)."""
        indexes = (
            self.pods[uid].completion_index for uid in self.created[since:] if uid in self.pods
        )
        return [-1 if ix is None else ix for ix in indexes]

    def finish_index(self, index: int, phase: str) -> str:
        """The active pod of ``index`` finishes."""
        [pod] = [p for p in self.active() if p.completion_index == index]
        self.pods[pod.uid] = replace(pod, phase=phase, finished_at=self.now)
        return pod.uid

    def patch_spec(self, **changes: Any) -> None:
        job = self.job
        self.job = replace(job, spec=replace(job.spec, **changes), generation=job.generation + 1)

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def failure_facts(
    pod: PodInfo,
    exit_code: int | None = None,
    *,
    conditions: tuple[str, ...] = (),
    container: str = "main",
) -> PodFailureFacts:
    """What model.parse_pod keeps of a failed pod whose container ``container`` exited
    with ``exit_code`` (None: none terminated) and that has the True ``conditions``."""
    containers = () if exit_code is None else (ContainerStatus(container, exit_code),)
    return PodFailureFacts(
        namespace=pod.namespace,
        name=pod.name,
        container_statuses=containers,
        conditions=tuple(PodCondition(ctype, "True") for ctype in conditions),
    )


def _pod_failure_backoff(spec: JobSpec) -> JsonDict | None:
    """A podFailureBackoff as the ParallelJob's JSON."""
    backoff = spec.pod_failure_backoff
    if backoff is None:
        return None
    raw: JsonDict = {}
    if backoff.initial_seconds is not None:
        raw["initialSeconds"] = backoff.initial_seconds
    if backoff.max_seconds is not None:
        raw["maxSeconds"] = backoff.max_seconds
    return raw


def _job_restart(policy: JobRestartPolicy | None) -> JsonDict | None:
    """A job-level restartPolicy as the ParallelJob's JSON."""
    if policy is None:
        return None
    return {
        "maxRestarts": policy.max_restarts,
        "onFailureReasons": sorted(policy.on_failure_reasons),
    }


def _success_policy(policy: SuccessPolicy | None) -> JsonDict | None:
    """A successPolicy as batch/v1 JSON."""
    if policy is None:
        return None
    rules: list[JsonDict] = []
    for rule in policy.rules:
        raw: JsonDict = {}
        if rule.succeeded_indexes is not None:
            raw["succeededIndexes"] = rule.succeeded_indexes
        if rule.succeeded_count is not None:
            raw["succeededCount"] = rule.succeeded_count
        rules.append(raw)
    return {"rules": rules}


def _pod_failure_policy(policy: PodFailurePolicy | None) -> JsonDict | None:
    """A podFailurePolicy as batch/v1 JSON."""
    if policy is None:
        return None
    rules: list[JsonDict] = []
    for rule in policy.rules:
        raw: JsonDict = {"action": rule.action}
        if rule.on_exit_codes is not None:
            codes = rule.on_exit_codes
            raw["onExitCodes"] = {"operator": codes.operator, "values": list(codes.values)}
            if codes.container_name is not None:
                raw["onExitCodes"]["containerName"] = codes.container_name
        if rule.on_pod_conditions:
            raw["onPodConditions"] = [
                {"type": p.type, "status": p.status} for p in rule.on_pod_conditions
            ]
        rules.append(raw)
    return {"rules": rules}
