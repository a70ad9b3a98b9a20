"""The operator's caches: every job's pods, and the jobs, listed and watched by its own
informers (shell/informer.py), each pod read once into a PodInfo (kind.kind_of_pod says
as what kind's) and filed by its jobs' uids (pod_cache.py).

One watch per kind of object (issue 34): the jobs' informers are also what the job loops
read. Each job listed, added or modified is handed whole to its kind's controller
(Controller.job_seen: its loop starts, or is given the newer version), each deletion
ends its loop (Controller.job_deleted). kopf runs the operator (its start-up, the
probes, the login) but watches no job: it would be a second stream of the same jobs, in
no fixed order with this one (a late event of one after the other's deletion restarted
a deleted job's loop), and neither the standby's records nor the takeover's catch-up
below could be built on it (kopf starts only once leading, and keeps its resourceVersion
and bookmarks to itself).

The caches need no controller, so they start before any: under a leader election as
soon as the process stands by (cli.py), so that a standby takes over with them in sync
(a warm standby: listing 50,000 pods took 10 s on an idle API server and 16-27 s on a
busy one, issue 23, and is off the failover's path); without one at kopf's startup. The
controllers are attached once the process leads: each then sees every pod already
cached, as a listing would have handed it on (orphans among them are judged then), and
runs every job the standby kept a record of (job_record: what a runtime reads, 1-2 KB of
JSON), the new ones first (a job created during a failover, listed last, had its first
pod 18-30 s after the takeover at 10,000 jobs when the new leader listed them again,
issue 23). Once leading, no record is kept: the informer's events keep each job's
version up to date.

No job syncs before the pods are listed, no pod is judged an orphan before the jobs are
(CacheSync). No index of kopf's, so no barrier that holds every handler until every
object is indexed (issue 23: CPU quadratic in the objects).

A takeover trusts nothing stale (issue 34). What a standby cached may lack the last
writes of the leader it replaces (its watch a little behind, or that leader paused and
resumed): pods it created, finalizers it removed, counts it wrote. A new job record, or
a sync, built on that would create pods again or count a pod twice. So under an election
the controllers attach only once every job informer has caught up with the API server as
of the takeover (Informer.catch_up: the current resourceVersion read after the Lease was
taken, then the watch's events, or a bookmark, up to it), and no job syncs before the
pod informers have too (CacheSync.current). A cache already at that version costs one
LIST of one object per informer; a quiet one waits for a bookmark, about a second.

The pod watch is filtered on the server by the label every pod the operator creates
carries (kind.WATCH_LABEL), except with PJ_MANAGE_JOBS=all: then the pods the built-in
Job controller created are the operator's too, and they carry only
``batch.kubernetes.io/controller-uid``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import replace
from typing import Any, NamedTuple

from .config import MANAGE_JOBS_ALL, MANAGE_JOBS_OFF, OperatorConfig
from .core.kind import PARALLELJOB, WATCH_LABEL, JobKind, batch_job, kind_of_pod
from .core.model import PodInfo, parse_pod
from .json_types import JsonDict
from .shell.consistency import JOBS, PODS, CacheVersion
from .shell.controller import CacheSync, Controller
from .shell.fence import WriteFence
from .shell.gc_pauses import bound_full_collections
from .shell.informer import Informer, KubeListWatch, version_number
from .shell.kube import Kube, load_configuration, user_agent
from .shell.pod_cache import PodCache
from .shell.runtime import compact_metadata

log = logging.getLogger(__name__)

#: What a pod event is read as when no Job controller runs (the keys are the same for
#: both settings of batch_job).
_JOB_PODS = batch_job(take_unmanaged=False)
#: The labels that make a pod one of a job's: the operator's, or a Job's (all mode).
_POD_LABELS = (WATCH_LABEL, _JOB_PODS.controller_uid_label)
_TRACKING_FINALIZERS = frozenset(_JOB_PODS.finalizers + PARALLELJOB.finalizers)
#: How often the startup freezes what it has built (seconds), and for how long at most
#: (a controller that never catches up with the listing must not freeze for good what
#: later collections would free).
FREEZE_EVERY = 1.0
FREEZE_FOR_AT_MOST = 600.0
#: Cached pods handed to the controllers between two turns of the event loop, when
#: they attach to caches already in sync (50,000 in one go held it for about 0.25 s).
REPLAY_YIELD_EVERY = 1000

#: A pod as the pod informer keeps it: its kind's name and what the core reads.
CachedPod = tuple[str, PodInfo]


class CachedJob(NamedTuple):
    """A job as a job informer keeps it."""

    uid: str
    #: While no controller of its kind is attached, its job_record (b"": none kept, once
    #: a controller runs the job, or for a job its kind leaves to another controller).
    record: bytes = b""
    #: No controller has started it yet (no status.startTime): its first pods wait.
    new: bool = False


def job_kinds(config: OperatorConfig) -> tuple[JobKind, ...]:
    """The kinds of job the operator reconciles with these settings, a pod's kind looked
    up in this order (a Job's pods made by the operator carry both kinds' labels)."""
    if config.manage_jobs == MANAGE_JOBS_OFF:
        return (PARALLELJOB,)
    return (batch_job(take_unmanaged=config.manage_jobs == MANAGE_JOBS_ALL), PARALLELJOB)


def is_jobs_pod(meta: Mapping[str, Any]) -> bool:
    """A pod labelled as a job's; or one that was and still holds a tracking finalizer
    (its labels removed: with PJ_MANAGE_JOBS=all no server-side selector turns that
    into a DELETED event, and its job must release it, as upstream's ref manager does)."""
    labels = meta.get("labels") or {}
    finalizers = meta.get("finalizers") or ()
    return any(label in labels for label in _POD_LABELS) or any(
        f in _TRACKING_FINALIZERS for f in finalizers
    )


def _scopes(config: OperatorConfig) -> tuple[str, ...]:
    """The namespaces watched, "" for all of them."""
    return config.namespaces or ("",)


def _pods_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"


def _jobs_path(kind: JobKind, namespace: str) -> str:
    if namespace:
        return kind.path(namespace)
    root = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    return f"{root}/{kind.plural}"


def job_record(body: Mapping[str, Any]) -> bytes:
    """What a standby keeps of a job to start its loop with when it leads: the fields a
    runtime reads (its compact metadata, the spec and the status), as compact JSON (a
    dict of the JSON costs about six times its text; no managedFields)."""
    meta = body.get("metadata") or {}
    record = {
        "metadata": compact_metadata(meta),
        "spec": body.get("spec") or {},
        "status": body.get("status") or {},
    }
    return json.dumps(record, separators=(",", ":")).encode()


class Caches:
    """The pod cache and the informers that fill it, and the controllers they feed
    (none while the process stands by)."""

    def __init__(self, kube: Kube, config: OperatorConfig, *, elected: bool = False) -> None:
        #: The operator's client: the informers' and, once leading, the controllers'.
        self.kube = kube
        self.kinds = job_kinds(config)
        self.pods = PodCache()
        self.synced = CacheSync(jobs=asyncio.Event(), current=asyncio.Event())
        #: Under a leader election: the caches filled before this process led catch up
        #: when it starts leading (attach).
        self.catch_up_on_attach = elected
        #: A controller per kind of job, by kind name, once attached.
        self.controllers: dict[str, Controller] = {}
        #: The informers, their sync, the freezes, and the finalizer releases.
        self.tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        #: Removes the GC callback open() installed.
        self._unbind_gc: Callable[[], None] = lambda: None
        selector = "" if config.manage_jobs == MANAGE_JOBS_ALL else WATCH_LABEL
        #: The namespaces watched ("" for all), each with an informer of each resource.
        self.scopes = _scopes(config)
        self.pod_informers: list[Informer[CachedPod]] = [
            Informer(
                KubeListWatch(kube, _pods_path(ns)),
                project=self.read_pod,
                on_change=self.pod_changed,
                name=f"pods in {ns or 'all namespaces'}",
                label_selector=selector,
            )
            for ns in self.scopes
        ]
        #: An informer of each kind's jobs, by kind name, per scope.
        self.job_informers: dict[str, list[Informer[CachedJob]]] = {
            kind.kind: [
                Informer(
                    KubeListWatch(kube, _jobs_path(kind, ns)),
                    project=self._job_reader(kind),
                    on_change=self._job_listed(kind.kind),
                    name=f"{kind.plural} in {ns or 'all namespaces'}",
                    on_object=self._job_watched(kind.kind),
                )
                for ns in self.scopes
            ]
            for kind in self.kinds
        }

    @classmethod
    async def open(cls, config: OperatorConfig, fence: WriteFence | None = None) -> Caches:
        """Caches on a client of their own, by the operator's API settings (once per
        process: what they and the controllers build is what the GC must not pause the
        event loop over, gc_pauses.py). ``fence``: under a leader election, what each
        of the client's writes asks last (shell/fence.py)."""
        api = config.api
        kube = Kube(
            await load_configuration(),
            concurrency=api.concurrency,
            qps=api.qps,
            burst=api.burst,
            fence=fence,
            user_agent=user_agent(config.leader_election.identity),
        )
        caches = cls(kube, config, elected=fence is not None)
        caches._unbind_gc = bound_full_collections(asyncio.get_running_loop().call_soon_threadsafe)
        return caches

    def start(self) -> None:
        """Each informer a task; and the tasks that open the gates as they sync
        (CacheSync) and freeze what the listing builds."""
        informers: list[Informer[Any]] = [*self.pod_informers]
        for each in self.job_informers.values():
            informers.extend(each)
        for informer in informers:
            self.spawn(informer.run(), informer.name)
        self.spawn(self._open_gates(), "cache sync")
        self.spawn(self._freeze_until_synced(), "freeze what the listing builds")

    async def attach(self, controllers: Mapping[str, Controller]) -> None:
        """The controllers, once the process leads: each sees the pods already cached,
        a turn of the event loop every REPLAY_YIELD_EVERY pods (an event for a pod
        meanwhile is seen as well: seeing a pod twice changes nothing); then starts the
        jobs already cached (start_cached_jobs)."""
        if self.catch_up_on_attach:
            # Started together: the pods' catch-up overlaps the jobs' (one bookmark's wait).
            self.spawn(self._pods_current(), "pods caught up")
            jobs = [i for each in self.job_informers.values() for i in each]
            await self._catch_up(jobs)  # before the records start any job
        self.controllers = dict(controllers)
        for name, controller in self.controllers.items():
            controller.job_exists = self.job_exists_for(name, controller)
            controller.cache_version = self.cache_version_for(name)
        started = await self.start_cached_jobs(new=True)
        cached = [pod for informer in self.pod_informers for pod in informer.store.values()]
        for done, (kind, pod) in enumerate(cached, start=1):
            self._observe(kind, pod, gone=False)
            if done % REPLAY_YIELD_EVERY == 0:
                await asyncio.sleep(0)
        started += await self.start_cached_jobs(new=False)
        if cached or started:
            log.info(
                "controllers attached to caches in sync: %d pods, %d jobs cached",
                len(cached),
                started,
            )
        self.spawn(self._freeze_until_synced(), "freeze what the jobs' listing builds")

    async def start_cached_jobs(self, *, new: bool) -> int:
        """The loops of the cached jobs that are ``new`` (or not) started from their
        records, the last the informer saw first (those its watch added after its
        listing: created since), a turn of the event loop every REPLAY_YIELD_EVERY jobs;
        the records are dropped. The new ones start before the cached pods are replayed
        (a new job has none): a job created while no replica led, e.g. during a
        failover, is the one waiting for a pod. A job deleted, or changed, while this
        goes (the informer runs between the turns) is not started from its record: its
        deletion ended it, its change started it. The number started."""
        started = 0
        for name, controller in self.controllers.items():
            for informer in self.job_informers[name]:
                for cached in reversed(list(informer.store.values())):
                    if not cached.record or cached.new != new:
                        continue
                    if informer.store.get(cached.uid) is not cached:
                        continue  # deleted, or its event came meanwhile
                    informer.store[cached.uid] = CachedJob(cached.uid)
                    controller.job_seen(json.loads(cached.record))
                    started += 1
                    if started % REPLAY_YIELD_EVERY == 0:
                        await asyncio.sleep(0)
        return started

    async def close(self) -> None:
        """Stops the informers and closes the client (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.kube.close()
        self._unbind_gc()

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # -- the pod informer's changes ------------------------------------------------------
    def read_pod(self, body: Mapping[str, Any]) -> CachedPod | None:
        """A pod read as of its kind; None for a pod of no job, or of a kind not
        reconciled."""
        meta = body.get("metadata") or {}
        if not is_jobs_pod(meta):
            return None
        kind = kind_of_pod(meta, self.kinds)
        if kind is None:
            return None
        return kind.kind, parse_pod(body, kind)

    def pod_changed(self, old: CachedPod | None, new: CachedPod | None, gone: bool) -> None:
        """The cache files the pod anew and its kind's controller sees it (a pod no
        longer a job's is seen as gone, without the finalizer it no longer has). A
        deleted pod's last state is seen, but no longer filed."""
        self.pods.change(old[1] if old else None, new[1] if new and not gone else None)
        if new is not None:
            kind, pod = new
        elif old is not None:
            kind, pod = old[0], old[1] if gone else replace(old[1], has_finalizer=False)
            gone = True
        else:
            return
        self._observe(kind, pod, gone)

    def _observe(self, kind: str, pod: PodInfo, gone: bool) -> None:
        """The pod seen by its kind's controller, if attached; a finalizer release it
        calls for runs beside the watch."""
        controller = self.controllers.get(kind)
        if controller is None:
            return  # standing by: the controllers see the cache once attached
        release = controller.observe_pod(pod, gone)
        if release is not None:
            self.spawn(release, f"release {pod.namespace}/{pod.name}")

    # -- the jobs ------------------------------------------------------------------------
    def _job_reader(self, kind: JobKind) -> Callable[[JsonDict], CachedJob | None]:
        def read_job(body: JsonDict) -> CachedJob | None:
            """A job as its kind's informer keeps it: its record while no controller
            runs it (a standby's), for a job its kind reconciles."""
            uid = str((body.get("metadata") or {}).get("uid") or "")
            if not uid:
                return None
            spec = body.get("spec") or {}
            if kind.kind in self.controllers or not kind.reconciles(spec):
                return CachedJob(uid)
            started = bool((body.get("status") or {}).get("startTime"))
            return CachedJob(uid, job_record(body), new=not started)

        return read_job

    def _job_watched(self, kind: str) -> Callable[[JsonDict], None]:
        def on_object(body: JsonDict) -> None:
            """A job listed, added or modified, handed to its loop once leading
            (standing by, its record is what is kept: read_job)."""
            controller = self.controllers.get(kind)
            if controller is not None:
                controller.job_seen(body)

        return on_object

    def _job_listed(self, kind: str) -> Callable[[CachedJob | None, CachedJob | None, bool], None]:
        def on_change(old: CachedJob | None, new: CachedJob | None, gone: bool) -> None:
            """A job deleted (or no longer listed): its loop ends, and the pods it still
            holds are released (standing by, nothing is held for it: the controllers
            judge its pods as orphans when they attach)."""
            controller = self.controllers.get(kind)
            if gone and old and controller is not None:
                for release in controller.job_deleted(old.uid):
                    self.spawn(release, f"release the pods of deleted job {old.uid}")

        return on_change

    def job_exists_for(self, kind: str, controller: Controller) -> Callable[[str], bool]:
        informers = self.job_informers[kind]

        def job_exists(uid: str) -> bool:
            """Listed or watched: a running loop's, one left to another controller, or
            one in the informer's store."""
            rt = controller.jobs.get(uid)
            return (
                (rt is not None and not rt.loop.stopped)  # a stopped loop's job is gone
                or uid in controller.left_alone
                or any(uid in i.store for i in informers)
            )

        return job_exists

    def cache_version_for(self, kind: str) -> CacheVersion:
        """Read-your-writes (shell/consistency.py): how far the informer that holds a
        namespace's pods, or its jobs of ``kind``, has applied events."""
        informers: dict[str, dict[str, Informer[Any]]] = {
            PODS: dict(zip(self.scopes, self.pod_informers, strict=True)),
            JOBS: dict(zip(self.scopes, self.job_informers[kind], strict=True)),
        }

        def cache_version(resource: str, namespace: str) -> int | None:
            scoped = informers[resource]
            informer = scoped.get(namespace) or scoped.get("")
            return version_number(informer.resource_version) if informer else None

        return cache_version

    def jobs_listed(self, kind: str) -> int:
        """The jobs of a kind the informers list now."""
        return sum(len(i.store) for i in self.job_informers[kind])

    # -- the startup ---------------------------------------------------------------------
    async def _catch_up(self, informers: list[Informer[Any]]) -> None:
        started = asyncio.get_running_loop().time()
        await asyncio.gather(*(i.catch_up() for i in informers))
        log.info(
            "%s: as new as the API server after %.2fs",
            ", ".join(i.name for i in informers),
            asyncio.get_running_loop().time() - started,
        )

    async def _pods_current(self) -> None:
        """Job syncs start once the pod informers have caught up (attach)."""
        try:
            await self._catch_up(self.pod_informers)
        finally:
            self.synced.current.set()

    async def _open_gates(self) -> None:
        """Job syncs start once every pod is listed (under an election: once caught up,
        see attach); orphans are judged once every job is listed too (the controllers
        attached by then; later ones judge as they attach)."""
        await asyncio.gather(*(i.synced.wait() for i in self.pod_informers))
        if not self.catch_up_on_attach:
            self.synced.current.set()
        log.info("pods listed: %d jobs have pods", len(self.pods))
        for informers in self.job_informers.values():
            await asyncio.gather(*(i.synced.wait() for i in informers))
        self.synced.jobs.set()
        await asyncio.gather(*(c.judge_orphans() for c in self.controllers.values()))

    def _busy(self) -> bool:
        """Still listing: the caches are not in sync, or a controller has not seen
        every job its kind lists yet, or has a sync pending."""
        return not self.synced.jobs.is_set() or any(
            c.pending_syncs() or len(c.jobs) + len(c.left_alone) < self.jobs_listed(name)
            for name, c in self.controllers.items()
        )

    async def _freeze_until_synced(self) -> None:
        """Freezes every second until the listing is over (see _busy) and two looks
        found it so. What a listing builds (a projection per pod, a record per job)
        lives as long as its object, and a full collection scans every tracked object
        not frozen: over 50,000 pods and 10,000 jobs one held the loop for 0.2-0.5 s,
        several times a second (the freeze of what was imported, cli.py, leaves the GC's
        growth heuristic little to compare against). Frozen within a second of being
        built, each is scanned by no later collection."""
        quiet, looks = 0, int(FREEZE_FOR_AT_MOST / FREEZE_EVERY)
        while quiet < 2 and looks:
            _freeze_survivors()
            await asyncio.sleep(FREEZE_EVERY)
            quiet, looks = (0 if self._busy() else quiet + 1), looks - 1
        _freeze_survivors()


def _freeze_survivors() -> None:
    """Collects the young generations (a few milliseconds: what the last second left as
    cyclic garbage is freed, not frozen for good), then freezes what is left."""
    gc.collect(1)
    gc.freeze()
