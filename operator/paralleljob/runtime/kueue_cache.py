"""What the operator reads of Kueue, where Kueue is installed: the Workloads ParallelJobs
own and the ResourceFlavors, each listed and watched by an informer of its own
(informer.py), and the ParallelJobs that ask for a queue (the
``kueue.x-k8s.io/queue-name`` label), kept from the one ParallelJob watch (caches.py
hands each body over). Kueue's JobReconciler reads the same from its informers: a job,
the Workloads whose owner references name it (Kueue indexes them by owner kind and
name, so a job made anew under the same name sees its predecessor's), and the flavors
an admission names.

Where Kueue's API is not served (:func:`kueue_served`), none of this exists: the
operator starts and runs without Kueue's CRDs.

A change of any of these wakes the subscriber (``KueueSubscriber.changed``) with the
key of the job it concerns, ``namespace/name``. The answer to the controller's own
write is kept too when it is newer than what the watch has shown (``written``), so a
sync never decides on the version before its own write.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .. import constants as c
from ..core import (
    KUEUE_API_VERSION,
    QUEUE_LABEL,
    RESOURCE_FLAVOR_PLURAL,
    WORKLOAD_PLURAL,
    QueuedJob,
    ResourceFlavor,
    Workload,
    kueue_path,
    parse_queued_job,
    parse_resource_flavor,
    parse_workload,
    version_number,
)
from ..json_types import JsonDict
from .api import ApiError
from .informer import Informer
from .kube import Kube, KubeListWatch
from .subscribers import KueueSubscriber

log = logging.getLogger(__name__)


async def kueue_served(kube: Kube) -> bool:
    """Whether the API server serves Kueue's Workloads and ResourceFlavors at the
    version the operator speaks."""
    try:
        found = await kube.request("GET", f"/apis/{KUEUE_API_VERSION}")
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
    served = {str(r.get("name")) for r in found.get("resources") or [] if isinstance(r, dict)}
    return {WORKLOAD_PLURAL, RESOURCE_FLAVOR_PLURAL} <= served


def job_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def owner_keys(wl: Workload) -> set[str]:
    """The ParallelJobs ``wl``'s owner references name, as keys."""
    return {
        job_key(wl.namespace, ref.name)
        for ref in wl.owners
        if ref.kind == c.KIND and ref.api_version.split("/")[0] == c.GROUP
    }


def read_workload(body: JsonDict) -> Workload | None:
    """A Workload as the cache keeps it: parsed, when a ParallelJob owns it."""
    wl = parse_workload(body)
    return wl if wl.uid and owner_keys(wl) else None


def _newer(version: str, than: str) -> bool:
    """Whether ``version`` is newer than ``than`` (one that is no number counts as
    newer: the watch's word goes)."""
    mine, theirs = version_number(version), version_number(than)
    return mine is None or theirs is None or mine > theirs


class KueueCache:
    def __init__(self, kube: Kube, scopes: tuple[str, ...]) -> None:
        self.subscriber: KueueSubscriber | None = None
        #: The queued ParallelJobs (those with the queue label), by key, with the
        #: resourceVersion read; and each one's key by uid (a deletion names the uid).
        self._jobs: dict[str, tuple[QueuedJob, str]] = {}
        self._keys: dict[str, str] = {}
        #: The Workloads by the key of each ParallelJob that owns them, by uid.
        self._workloads: dict[str, dict[str, Workload]] = {}
        self.workload_informers: list[Informer[Workload]] = [
            Informer(
                KubeListWatch(kube, kueue_path(WORKLOAD_PLURAL, ns)),
                project=read_workload,
                on_change=self._workload_changed,
                name=f"workloads in {ns or 'all namespaces'}",
            )
            for ns in scopes
        ]
        self.flavor_informer: Informer[ResourceFlavor] = Informer(
            KubeListWatch(kube, kueue_path(RESOURCE_FLAVOR_PLURAL)),
            project=parse_resource_flavor,
            on_change=lambda old, new, gone: None,
            name="resourceflavors",
        )

    @property
    def informers(self) -> list[Informer[Any]]:
        return [*self.workload_informers, self.flavor_informer]

    # -- reads -------------------------------------------------------------------------
    def job(self, key: str) -> tuple[QueuedJob, str] | None:
        """The queued job and the resourceVersion it was read at; None when no queued
        job has that key (gone, or without the label)."""
        return self._jobs.get(key)

    def workloads_of(self, key: str) -> tuple[Workload, ...]:
        return tuple(self._workloads.get(key, {}).values())

    def flavors(self) -> Mapping[str, ResourceFlavor]:
        return {f.name: f for f in self.flavor_informer.store.values()}

    def keys(self) -> set[str]:
        """Every job known: queued, or owning a Workload."""
        return set(self._jobs) | set(self._workloads)

    # -- what the ParallelJob watch hands over -----------------------------------------
    def job_seen(self, body: Mapping[str, Any]) -> None:
        """A ParallelJob listed, added or modified: kept while it asks for a queue."""
        meta = body.get("metadata") or {}
        key = job_key(str(meta.get("namespace", "")), str(meta.get("name", "")))
        version = str(meta.get("resourceVersion") or "")
        known = self._jobs.get(key)
        if known is not None and known[0].uid == meta.get("uid") and not _newer(version, known[1]):
            return  # what is known is newer (the answer to this process's own write)
        if QUEUE_LABEL in (meta.get("labels") or {}):
            job = parse_queued_job(body)
            self._jobs[key] = (job, version)
            self._keys[job.uid] = key
        elif self._jobs.pop(key, None) is None and key not in self._workloads:
            return  # never Kueue's: nothing to wake
        self._changed(key)

    def job_deleted(self, uid: str) -> None:
        key = self._keys.pop(uid, None)
        if key is not None:
            known = self._jobs.get(key)
            if known is not None and known[0].uid == uid:
                del self._jobs[key]
            self._changed(key)

    def job_written(self, body: Mapping[str, Any]) -> None:
        """The answer to the controller's own write of the job."""
        self.job_seen(body)

    # -- the Workloads -----------------------------------------------------------------
    def workload_written(self, body: JsonDict) -> None:
        """The answer to the controller's own write of a Workload, kept when newer."""
        wl = read_workload(body)
        if wl is not None:
            self._index(wl, notify=False)

    def workload_gone(self, wl: Workload) -> None:
        for key in owner_keys(wl):
            self._workloads.get(key, {}).pop(wl.uid, None)
            if not self._workloads.get(key, True):
                del self._workloads[key]

    def _workload_changed(self, old: Workload | None, new: Workload | None, gone: bool) -> None:
        if old is not None and (gone or new is None or owner_keys(old) != owner_keys(new)):
            self.workload_gone(old)
            for key in owner_keys(old):
                self._changed(key)
        if new is not None and not gone:
            self._index(new, notify=True)

    def _index(self, wl: Workload, *, notify: bool) -> None:
        for key in owner_keys(wl):
            known = self._workloads.setdefault(key, {}).get(wl.uid)
            if known is not None and not _newer(wl.resource_version, known.resource_version):
                continue
            self._workloads[key][wl.uid] = wl
            if notify:
                self._changed(key)

    def _changed(self, key: str) -> None:
        if self.subscriber is not None:
            self.subscriber.changed(key)
