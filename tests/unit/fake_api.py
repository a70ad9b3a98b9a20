"""An in-memory API server for one ParallelJob and its pods, and an event recorder
that keeps what it is given: the unit tests' :class:`~paralleljob.runtime.api.ControllerApi`,
:class:`~paralleljob.runtime.api.EventSink` and :class:`~paralleljob.runtime.events.Recorder`
(upstream's tests have ``controller.FakePodControl`` and ``record.FakeRecorder``).

Every call that reaches the fake is recorded, in order, with its body, so that tests
can assert the order of a sync's calls. A call can be refused (:meth:`FakeApi.fail`),
and the operator can be made to crash just before or just after a call
(:meth:`FakeApi.crash`): from then on every call raises :class:`Crash` without effect,
as the calls of a dead process never arrive, until :meth:`FakeApi.recover`.

Pods are kept as the operator's pod index holds them (PodInfo by UID), always up to
date: the tests play kubelet and users on them directly. Everything that talks to a
real API server is tested against one (tests/e2e, tests/deploy).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from paralleljob import constants as c
from paralleljob.core.event import Event
from paralleljob.core.job.kind import PARALLELJOB, JobKind
from paralleljob.core.job.model import PodInfo, parse_pod
from paralleljob.core.job.pod_failure_policy import PodCondition, PodFailureFacts
from paralleljob.runtime.api import ApiError
from paralleljob.runtime.events import JobRef
from paralleljob.timeutil import format_time
from tests.support.stub_api.patch import merge_patch

JsonDict = dict[str, Any]
T = TypeVar("T")


class Crash(Exception):
    """The operator process died: raised in place of an API call or of its answer."""


@dataclass(frozen=True)
class Call:
    """One call that reached the API server: the protocol method, the object's name
    and the body sent (a copy)."""

    method: str
    name: str = ""
    body: JsonDict | None = None


@dataclass
class _CrashRule:
    method: str | None
    countdown: int
    after: bool


def _stored(pod: PodInfo) -> JsonDict:
    """A patched pod as the fake answers: its name and uid (the fake keeps no
    resourceVersion of pods)."""
    return {"metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}}


def _utc_now() -> datetime:
    return datetime.now(UTC)


class FakeApi:
    def __init__(
        self, job: JsonDict, now: Callable[[], datetime] = _utc_now, kind: JobKind = PARALLELJOB
    ) -> None:
        self.job = copy.deepcopy(job)
        #: The job's kind: how the pods created are read back (their finalizers).
        self.kind = kind
        self.job["metadata"].setdefault("resourceVersion", "1")
        self._rv = itertools.count(int(self.job["metadata"]["resourceVersion"]) + 1)
        self._now = now
        #: The job's pods by UID, as the pod index would hold them.
        self.pods: dict[str, PodInfo] = {}
        #: UIDs of the pods created, in order (a pod's number is its place here).
        self.created: list[str] = []
        self.calls: list[Call] = []
        self.events: list[JsonDict] = []
        self.crashed = False
        #: The client-side rate limit is saturated (see Kube.has_spare_budget).
        self.busy = False
        self._crash: _CrashRule | None = None
        self._errors: dict[tuple[str, str | None], ApiError] = {}

    # -- what the operator's caches would hold -----------------------------------------
    @property
    def uid(self) -> str:
        return str(self.job["metadata"]["uid"])

    def pods_of(self, uid: str) -> list[PodInfo]:
        """The pod index: pods labelled with the job's uid or controlled by it."""
        return [p for p in self.pods.values() if uid in (p.label_uid, p.controller_uid)]

    # -- faults ------------------------------------------------------------------------
    def fail(self, method: str, error: ApiError, *, name: str | None = None) -> None:
        """Refuses every call of ``method`` (on the object ``name``, or on any) with
        ``error`` until :meth:`heal`."""
        self._errors[method, name] = error

    def heal(self, method: str, *, name: str | None = None) -> None:
        self._errors.pop((method, name), None)

    def crash(self, *, method: str | None = None, nth: int = 1, after: bool = False) -> None:
        """The operator dies at the ``nth`` call from now (of ``method``, or of any):
        before it reaches the server, or ``after`` the server acted on it."""
        self._crash = _CrashRule(method, nth, after)

    def recover(self) -> None:
        """A new operator process: its calls reach the server again."""
        self.crashed = False

    def _crash_due(self, method: str) -> _CrashRule | None:
        rule = self._crash
        if rule is None or rule.method not in (None, method):
            return None
        rule.countdown -= 1
        if rule.countdown > 0:
            return None
        self._crash = None
        return rule

    def _call(self, call: Call, effect: Callable[[], T]) -> T:
        """Runs one call as the server would, with the faults armed."""
        if self.crashed:
            raise Crash(f"{call.method} {call.name}: the operator is down")
        crash = self._crash_due(call.method)
        if crash is not None and not crash.after:
            self.crashed = True
            raise Crash(f"before {call.method} {call.name}")
        self.calls.append(replace(call, body=copy.deepcopy(call.body)))
        error = self._errors.get((call.method, call.name)) or self._errors.get((call.method, None))
        if error is not None:
            raise error
        result = effect()
        if crash is not None:
            self.crashed = True
            raise Crash(f"after {call.method} {call.name}")
        return result

    # -- users -------------------------------------------------------------------------
    def update_job(self, body: JsonDict) -> None:
        """A user's update of the job (a new resourceVersion; not an operator call)."""
        self.job = copy.deepcopy(body)
        self.job["metadata"]["resourceVersion"] = str(next(self._rv))

    # -- ControllerApi -----------------------------------------------------------------
    async def get_job(self, namespace: str, name: str) -> JsonDict:
        return self._call(Call("get_job", name), lambda: copy.deepcopy(self.job))

    async def patch_job(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        return self._call(Call("patch_job", name, patch), lambda: self._patch(patch, "spec"))

    async def patch_job_status(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        call = Call("patch_job_status", name, patch)
        return self._call(call, lambda: self._patch(patch, "status"))

    def _patch(self, patch: JsonDict, part: str) -> JsonDict:
        """A merge patch of the metadata and ``part``, with the resourceVersion in the
        patch as precondition."""
        meta = dict(patch.get("metadata") or {})
        if meta.pop("resourceVersion", None) not in (None, self.job["metadata"]["resourceVersion"]):
            raise ApiError(409, "Conflict", "the object has been modified")
        self.job = merge_patch(self.job, {"metadata": meta, part: patch.get(part) or {}})
        self.job["metadata"]["resourceVersion"] = str(next(self._rv))
        return copy.deepcopy(self.job)

    async def delete_job(self, namespace: str, name: str, uid: str) -> None:
        self._call(Call("delete_job", name), lambda: None)

    async def list_job_pods(self, namespace: str, job_uid: str) -> list[PodInfo]:
        """The pods labelled with the job's uid, as the server holds them now."""
        listed = lambda: [p for p in self.pods.values() if p.label_uid == job_uid]  # noqa: E731
        return self._call(Call("list_job_pods", job_uid), listed)

    async def create_pod(self, namespace: str, pod: JsonDict) -> JsonDict:
        n = len(self.created)
        name = f"{pod['metadata']['generateName']}{n:05d}"
        return self._call(Call("create_pod", name, pod), lambda: self._create(pod, name, n))

    def _create(self, pod: JsonDict, name: str, n: int) -> JsonDict:
        stored = copy.deepcopy(pod)
        created = format_time(self._now())
        stored["metadata"].update(name=name, uid=f"uid-{n}", creationTimestamp=created)
        info = parse_pod(stored, self.kind)
        self.pods[info.uid] = info
        self.created.append(info.uid)
        return stored

    async def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        def delete() -> None:
            pod = self._pod(name)
            if pod.uid != uid:
                raise ApiError(409, "Conflict", "Precondition failed: UID in precondition")
            self.pods[uid] = replace(pod, deleting=True, finished_at=self._now())

        self._call(Call("delete_pod", name), delete)

    async def remove_pod_finalizer(self, namespace: str, name: str) -> JsonDict:
        def remove() -> JsonDict:
            pod = self._pod(name)
            self.pods[pod.uid] = replace(pod, has_finalizer=False)
            return _stored(pod)

        return self._call(Call("remove_pod_finalizer", name), remove)

    async def fail_pod(
        self, namespace: str, name: str, uid: str, resource_version: str, condition: JsonDict
    ) -> JsonDict:
        """The pod Failed, with ``condition`` among the conditions a pod failure policy
        reads (one of its type replaced), as parse_pod would read the pod back; a conflict
        if the pod's ``unstarted_version`` is not ``resource_version`` (when given)."""

        def fail() -> JsonDict:
            pod = self._pod(name, uid)
            if resource_version and pod.unstarted_version != resource_version:
                raise ApiError(409, "Conflict", "the object has been modified")
            facts = pod.failure or PodFailureFacts(namespace=pod.namespace, name=pod.name)
            added = PodCondition(type=condition["type"], status=condition["status"])
            kept = tuple(x for x in facts.conditions if x.type != added.type)
            failure = replace(facts, conditions=(*kept, added))
            self.pods[uid] = replace(pod, phase=c.FAILED, finished_at=self._now(), failure=failure)
            return _stored(pod)

        return self._call(Call("fail_pod", name, condition), fail)

    async def adopt_pod(
        self, namespace: str, name: str, uid: str, owner: JsonDict, finalizer: str
    ) -> JsonDict:
        def adopt() -> JsonDict:
            pod = self._pod(name, uid)
            if pod.controller_uid is not None:
                raise ApiError(422, "Invalid", "Only one reference can have Controller set to true")
            self.pods[uid] = replace(pod, controller_uid=owner["uid"], has_finalizer=True)
            return _stored(pod)

        return self._call(Call("adopt_pod", name), adopt)

    async def release_pod(self, namespace: str, name: str, uid: str, owner_uid: str) -> JsonDict:
        def release() -> JsonDict:
            pod = self._pod(name, uid)
            owner = None if pod.controller_uid == owner_uid else pod.controller_uid
            self.pods[uid] = replace(pod, controller_uid=owner, has_finalizer=False)
            return _stored(pod)

        return self._call(Call("release_pod", name), release)

    def _pod(self, name: str, uid: str | None = None) -> PodInfo:
        """The pod ``name`` (with the precondition ``uid`` when given)."""
        pod = self._named(name)
        if uid is not None and pod.uid != uid:
            raise ApiError(409, "Conflict", "Precondition failed: UID in precondition")
        return pod

    def _named(self, name: str) -> PodInfo:
        for pod in self.pods.values():
            if pod.name == name:
                return pod
        raise ApiError(404, "NotFound", f'pods "{name}" not found')

    def has_spare_budget(self) -> bool:
        return not self.busy

    # -- EventSink ---------------------------------------------------------------------
    async def create_event(self, namespace: str, event: JsonDict) -> None:
        call = Call("create_event", event["metadata"]["name"], event)
        self._call(call, lambda: self.events.append(event))

    async def patch_event(self, namespace: str, name: str, patch: JsonDict) -> None:
        def apply() -> None:
            event = next((e for e in self.events if e["metadata"]["name"] == name), None)
            if event is None:
                raise ApiError(404, "NotFound", f'events "{name}" not found')
            event.update(patch)

        self._call(Call("patch_event", name, patch), apply)


class FakeRecorder:
    """upstream's record.FakeRecorder: keeps the events instead of posting them."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def record(self, job: JobRef, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(type_, reason, message))
