"""The operator's caches: every job's pods, the jobs and the ParallelCronJobs, listed and
watched by its own informers (informer.py), each pod read once into a PodInfo
(kind.kind_of_pod says as what kind's) and filed by its jobs' uids (pod_cache.py).

One watch per kind of object, and kopf watches none: the informers are also what the
controllers read. The caches publish to subscribers (subscribers.py) and know no
controller: each job listed, added or modified goes whole to its kind's subscriber
(``job_seen``), each deletion to ``job_deleted``; each ParallelCronJob to the cron
subscriber (``cron_seen``, ``cron_deleted``), and a change of one of its ParallelJobs
wakes it (``job_changed``). Nothing is subscribed while the process stands by, so under
a leader election the caches start at once (a warm standby, with a record of each job:
job_records.py); the controllers subscribe once it leads, and only after every job and
ParallelCronJob informer has caught up with the API server as of the takeover
(Informer.catch_up); no job syncs before the pod informers have too
(CacheSync.current), no pod is judged an orphan before the jobs are listed. Why each of
these, with the measurements: docs/design.md, "A warm standby", "One watch per kind" and
"A takeover trusts nothing stale".

The pod watch is filtered on the server by the label every pod the operator creates
carries (kind.WATCH_LABEL), except with PJ_MANAGE_JOBS=all: then the pods the built-in
Job controller created are the operator's too, and they carry only
``batch.kubernetes.io/controller-uid``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import replace
from typing import Any

from ..config import MANAGE_JOBS_ALL, OperatorConfig
from ..core import (
    PARALLELJOB,
    WATCH_LABEL,
    JobKind,
    PodInfo,
    cron_path,
    is_jobs_pod,
    job_kinds,
    jobs_path,
    kind_of_pod,
    parse_pod,
    pods_path,
    version_number,
)
from ..json_types import JsonDict
from .api import Fence
from .consistency import JOBS, PODS, CacheVersion
from .cron_children import CronChildren
from .gc_pauses import bound_full_collections, freeze_until_quiet
from .informer import Informer
from .job_records import CachedJob, job_record, start_recorded_jobs
from .kube import Kube, KubeListWatch, load_configuration, user_agent
from .kueue_cache import KueueCache, kueue_served
from .pod_cache import PodCache
from .subscribers import CacheSync, CronSubscriber, JobSubscriber, KueueSubscriber

log = logging.getLogger(__name__)

#: Cached pods handed to the controllers between two turns of the event loop, when
#: they attach to caches already in sync (50,000 in one go held it for about 0.25 s).
REPLAY_YIELD_EVERY = 1000

#: kubectl apply's copy of the object, which no controller reads.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

#: A pod as the pod informer keeps it: its kind's name and what the core reads.
CachedPod = tuple[str, PodInfo]


def _scopes(config: OperatorConfig) -> tuple[str, ...]:
    """The namespaces watched, "" for all of them."""
    return config.namespaces or ("",)


def read_cron(body: JsonDict) -> JsonDict | None:
    """A ParallelCronJob as its informer keeps it: whole (they are few) but for the
    metadata no controller reads (managedFields, last-applied-configuration)."""
    meta = body.get("metadata") or {}
    if not meta.get("uid"):
        return None
    kept = {key: value for key, value in meta.items() if key != "managedFields"}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    return {**body, "metadata": {**kept, "annotations": annotations}}


class Caches:
    """The pod cache and the informers that fill it, and the subscribers they feed
    (none while the process stands by)."""

    def __init__(self, kube: Kube, config: OperatorConfig, *, elected: bool = False) -> None:
        #: The operator's client: the informers' and, once leading, the controllers'.
        self.kube = kube
        self.kinds = job_kinds(config)
        self.pods = PodCache()
        #: The ParallelJobs each ParallelCronJob controls (cron_children.py).
        self.cron_children = CronChildren()
        self.synced = CacheSync(
            jobs=asyncio.Event(), current=asyncio.Event(), listed=asyncio.Event()
        )
        #: Under a leader election: the caches filled before this process led catch up
        #: when it starts leading (attach).
        self.catch_up_on_attach = elected
        #: A subscriber per kind of job, by kind name, once attached.
        self.controllers: dict[str, JobSubscriber] = {}
        #: The ParallelCronJobs' subscriber, once attached.
        self.crons: CronSubscriber | None = None
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
                KubeListWatch(kube, pods_path(ns)),
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
                    KubeListWatch(kube, jobs_path(kind, ns)),
                    project=self._job_reader(kind),
                    on_change=self._job_listed(kind.kind),
                    name=f"{kind.plural} in {ns or 'all namespaces'}",
                    on_object=self._job_watched(kind.kind),
                )
                for ns in self.scopes
            ]
            for kind in self.kinds
        }
        #: Kueue's Workloads and flavors and the queued ParallelJobs, where Kueue is
        #: installed (open() asks the API server).
        self.kueue: KueueCache | None = None
        #: The ParallelCronJob informers, per scope: each object kept whole.
        self.cron_informers: list[Informer[JsonDict]] = [
            Informer(
                KubeListWatch(kube, cron_path(ns)),
                project=read_cron,
                on_change=self._cron_changed,
                name=f"parallelcronjobs in {ns or 'all namespaces'}",
            )
            for ns in self.scopes
        ]

    @classmethod
    async def open(cls, config: OperatorConfig, fence: Fence | None = None) -> Caches:
        """Caches on a client of their own, by the operator's API settings (once per
        process: what they and the controllers build is what the GC must not pause the
        event loop over, gc_pauses.py). ``fence``: under a leader election, what each
        of the client's writes asks last (election/fence.py)."""
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
        if await kueue_served(kube):
            caches.kueue = KueueCache(kube, caches.scopes)
            log.info("Kueue's Workloads are served: queued ParallelJobs are Kueue's")
        caches._unbind_gc = bound_full_collections(asyncio.get_running_loop().call_soon_threadsafe)
        return caches

    def start(self) -> None:
        """Each informer a task; and the tasks that open the gates as they sync
        (CacheSync) and freeze what the listing builds."""
        informers: list[Informer[Any]] = [*self.cron_informers]
        informers.extend(self.kueue.informers if self.kueue else ())
        for each in self.job_informers.values():
            informers.extend(each)
        for informer in informers:
            self.spawn(informer.run(), informer.name)
        if self.catch_up_on_attach:
            for informer in self.pod_informers:
                self.spawn(informer.run(), informer.name)
        else:
            self.spawn(self._pods_after_jobs(), "pods after the jobs")
        self.spawn(self._open_gates(), "cache sync")
        self.spawn(freeze_until_quiet(self._busy), "freeze what the listing builds")

    async def attach(
        self,
        controllers: Mapping[str, JobSubscriber],
        crons: CronSubscriber | None = None,
        kueue: KueueSubscriber | None = None,
    ) -> None:
        """The subscribers, once the process leads: each job controller sees the pods
        already cached, a turn of the event loop every REPLAY_YIELD_EVERY pods (an event
        for a pod meanwhile is seen as well: seeing a pod twice changes nothing); then
        starts the jobs already cached (start_cached_jobs); the cron subscriber sees
        every ParallelCronJob cached; the Kueue subscriber, every queued job and every
        job that owns a Workload."""
        if self.catch_up_on_attach:
            # Started together: the pods' catch-up overlaps the jobs' (one bookmark's wait).
            self.spawn(self._pods_current(), "pods caught up")
            jobs = [i for each in self.job_informers.values() for i in each]
            kueue_informers = self.kueue.informers if self.kueue else []
            # Before anything starts.
            await self._catch_up([*jobs, *self.cron_informers, *kueue_informers])
        self.controllers = dict(controllers)
        if crons is not None:
            self.crons = crons
            self.cron_children.changed = crons.job_changed
            for informer in self.cron_informers:
                for body in list(informer.store.values()):
                    crons.cron_seen(body)
        if kueue is not None and self.kueue is not None:
            self.kueue.subscriber = kueue
            for key in sorted(self.kueue.keys()):
                kueue.changed(key)
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
        self.spawn(freeze_until_quiet(self._busy), "freeze what the jobs' listing builds")

    async def start_cached_jobs(self, *, new: bool) -> int:
        """The recorded jobs that are ``new`` (or not) started (job_records.py)."""
        return await start_recorded_jobs(
            self.controllers, self.job_informers, new=new, yield_every=REPLAY_YIELD_EVERY
        )

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
        """The pod seen by its kind's subscriber, if attached; a finalizer release it
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
            record, template = job_record(body)
            return CachedJob(uid, record, template, new=not started)

        return read_job

    def _job_watched(self, kind: str) -> Callable[[JsonDict], None]:
        def on_object(body: JsonDict) -> None:
            """A job listed, added or modified, handed to its loop once leading
            (standing by, its record is what is kept: read_job); a ParallelJob also to
            the index of the ParallelCronJobs' jobs."""
            if kind == PARALLELJOB.kind:
                self.cron_children.observe(body)
                if self.kueue is not None:
                    self.kueue.job_seen(body)
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
            if gone and old and kind == PARALLELJOB.kind:
                self.cron_children.forget(old.uid)
                if self.kueue is not None:
                    self.kueue.job_deleted(old.uid)
            if gone and old and controller is not None:
                for release in controller.job_deleted(old.uid):
                    self.spawn(release, f"release the pods of deleted job {old.uid}")

        return on_change

    def job_exists_for(self, kind: str, controller: JobSubscriber) -> Callable[[str], bool]:
        informers = self.job_informers[kind]

        def job_exists(uid: str) -> bool:
            """Listed or watched: a job the controller runs or leaves to another, or one
            in the informer's store."""
            return controller.runs(uid) or any(uid in i.store for i in informers)

        return job_exists

    # -- the ParallelCronJobs ------------------------------------------------------------
    def _cron_changed(self, old: JsonDict | None, new: JsonDict | None, gone: bool) -> None:
        """A ParallelCronJob to the cron subscriber, if attached: kept, or deleted (also
        one no longer listed after a re-list, whose DELETED the watch never sent)."""
        if self.crons is None:
            return
        if new is not None and not gone:
            self.crons.cron_seen(new)
        elif old is not None:
            self.crons.cron_deleted(str(old["metadata"]["uid"]))

    def cache_version_for(self, kind: str) -> CacheVersion:
        """Read-your-writes (runtime/consistency.py): how far the informer that holds a
        namespace's pods, or its jobs of ``kind``, has applied events."""
        informers: dict[str, dict[str, Informer[Any]]] = {
            PODS: dict(zip(self.scopes, self.pod_informers, strict=True)),
            JOBS: dict(zip(self.scopes, self.job_informers[kind], strict=True)),
        }

        def cache_version(resource: str, namespace: str) -> int | None:
            scoped = informers[resource]
            informer = scoped.get(namespace) or scoped.get("")
            return version_number(informer.applied_version) if informer else None

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

    async def _pods_after_jobs(self) -> None:
        """A process that leads at once (no election) lists the jobs before the pods: a
        new job's first sync waits for no pod (JobLoops: early syncs), only for the job
        to be listed, which the pods' listing (seven times the bytes) would slow down.
        A standby lists both at once: it has the time."""
        for informers in self.job_informers.values():
            await asyncio.gather(*(i.synced.wait() for i in informers))
        await asyncio.gather(*(i.run() for i in self.pod_informers))

    async def _open_gates(self) -> None:
        """Job syncs start once every pod is listed (under an election: once caught up,
        see attach); orphans are judged once every job is listed too (the controllers
        attached by then; later ones judge as they attach)."""
        await asyncio.gather(*(i.synced.wait() for i in self.pod_informers))
        self.synced.listed.set()
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
            c.pending_syncs() or c.known_jobs() < self.jobs_listed(name)
            for name, c in self.controllers.items()
        )
