"""What an upgrade test watches while the operator's replicas are replaced: every pod of
a namespace (one watch, so each event is one consistent state of the namespace, checked
against its owner's parallelism), and the leader-election Lease (its holders in turn and
the time no one held it)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Self

from kubernetes import watch

from tests.e2e.support import is_active
from tests.support.background import Background


@dataclass
class PodLedger(Background):
    """Every pod ever created in ``namespace``, by its controller's uid, from one watch
    (relisted after a 410); after every event each owner's active pods are compared with
    its parallelism: ``limits`` by the owner's name, else ``default_limit``."""

    core_v1: Any
    namespace: str
    default_limit: int
    limits: dict[str, int] = field(default_factory=dict)
    created: dict[str, set[str]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _ready: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        super().__enter__()
        assert self._ready.wait(timeout=30), "the pod watch never listed"
        return self

    def pods_of(self, owner_uid: str) -> int:
        """How many pods the owner ever had."""
        with self._lock:
            return len(self.created.get(owner_uid, set()))

    def _run(self) -> None:
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    version = self._relist()
                    self._ready.set()
                stream = watch.Watch().stream(
                    self.core_v1.list_namespaced_pod,
                    self.namespace,
                    resource_version=version,
                    timeout_seconds=5,
                )
                for event in stream:
                    pod = self.core_v1.api_client.sanitize_for_serialization(event["object"])
                    version = pod["metadata"]["resourceVersion"]
                    self._apply(event["type"], pod)
                    if self._stop.is_set():
                        return
            except Exception as exc:  # 410 Gone, or a dropped connection: list again
                if "410" not in str(exc) and "Expired" not in str(exc):
                    self.errors.append(f"pod watch: {exc}")
                version = ""
                self._stop.wait(0.5)

    def _relist(self) -> str:
        listed = self.core_v1.list_namespaced_pod(self.namespace)
        with self._lock:
            self._pods.clear()
        for item in listed.items:
            self._apply("ADDED", self.core_v1.api_client.sanitize_for_serialization(item))
        return str(listed.metadata.resource_version)

    def _apply(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        owner, name = _owner(pod)
        with self._lock:
            self.created.setdefault(owner, set()).add(meta["uid"])
            if kind == "DELETED":
                self._pods.pop(meta["uid"], None)
            else:
                self._pods[meta["uid"]] = pod
            limit = self.limits.get(name, self.default_limit)
            active = sorted(
                p["metadata"]["name"]
                for p in self._pods.values()
                if is_active(p) and _owner(p)[0] == owner
            )
            if len(active) > limit:
                self.violations.append(f"{len(active)} active > parallelism {limit}: {active}")


def _owner(pod: dict[str, Any]) -> tuple[str, str]:
    """The pod's controller: its uid and name."""
    refs = pod["metadata"].get("ownerReferences") or []
    return next(
        ((str(ref["uid"]), str(ref["name"])) for ref in refs if ref.get("controller")), ("", "")
    )


@dataclass(frozen=True)
class Tenure:
    """One holder's time with the Lease, as the samples saw it."""

    holder: str
    acquired: datetime
    #: The last renewal (or release) seen while it held the Lease.
    last_renewed: datetime


@dataclass
class LeaseLog(Background):
    """The Lease sampled every ``interval`` seconds: its holders in turn."""

    coordination_v1: Any
    namespace: str
    name: str
    interval: float = 0.25
    tenures: list[Tenure] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def takeovers(self) -> int:
        return max(len(self.tenures) - 1, 0)

    def leaderless_s(self) -> list[float]:
        """Per hand-over: from the old holder's last renewal (or release) to the new
        holder's acquisition."""
        return [
            (new.acquired - old.last_renewed).total_seconds()
            for old, new in zip(self.tenures, self.tenures[1:], strict=False)
        ]

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                spec = self.coordination_v1.read_namespaced_lease(self.name, self.namespace).spec
            except Exception:  # not created yet, or the API server is busy: no sample
                continue
            self._sample(spec)

    def _sample(self, spec: Any) -> None:
        holder, acquired, renewed = spec.holder_identity, spec.acquire_time, spec.renew_time
        last = self.tenures[-1] if self.tenures else None
        if (
            last is not None
            and renewed is not None
            and renewed > last.last_renewed
            and (not holder or holder == last.holder)  # renewed, or released
        ):
            self.tenures[-1] = Tenure(last.holder, last.acquired, renewed)
        if holder and acquired is not None and (last is None or holder != last.holder):
            self.tenures.append(Tenure(holder, acquired, renewed or acquired))


def minute_boundaries(after: datetime, until: datetime) -> set[datetime]:
    """The starts of minutes after ``after`` up to ``until``: when a schedule of every
    minute runs."""
    first = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    count = (until - first) // timedelta(minutes=1) + 1
    return {first + timedelta(minutes=i) for i in range(count)}
